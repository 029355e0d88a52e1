#!/usr/bin/env python3
"""Package a skill folder into a zip, after checking it."""

import sys

from scripts.quick_check import check
from scripts.utils import zip_folder


def main():
    if len(sys.argv) != 3:
        print("usage: package_skill.py SKILL_DIR OUT_DIR")
        return 1
    check(sys.argv[1])
    print(zip_folder(sys.argv[1], sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
