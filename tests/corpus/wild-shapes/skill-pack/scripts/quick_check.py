#!/usr/bin/env python3
"""Check a skill folder's SKILL.md."""

import os
import sys


def check(folder):
    if not os.path.isfile(os.path.join(folder, "SKILL.md")):
        raise SystemExit(f"{folder}: no SKILL.md")


if __name__ == "__main__":
    check(sys.argv[1])
    print("ok")
