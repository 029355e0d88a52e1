"""Helpers."""

import shutil
import subprocess


def zip_folder(folder, out):
    return shutil.make_archive(out, "zip", folder)


def review(folder):
    return subprocess.run(["claude", "-p", f"review {folder}"])
