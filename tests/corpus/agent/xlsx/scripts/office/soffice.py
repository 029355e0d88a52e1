#!/usr/bin/env python3
"""Run LibreOffice (soffice) headless with an environment that works in a sandbox.

Usage: python3 scripts/office/soffice.py --headless --convert-to pdf document.docx
"""
import os
import subprocess
import sys
import tempfile


def get_soffice_env():
    """soffice's environment: no display, a profile of its own in a writable temporary folder."""
    env = dict(os.environ)
    env["SAL_USE_VCLPLUGIN"] = "svp"
    env.setdefault("HOME", tempfile.gettempdir())
    return env


def run_soffice(args):
    return subprocess.run(["soffice", *args], env=get_soffice_env())


if __name__ == "__main__":
    sys.exit(run_soffice(sys.argv[1:]).returncode)
