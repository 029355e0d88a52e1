#!/usr/bin/env python3
"""Validate skill names before packaging them."""

import sys

from scripts.quick_validate import validate


def main():
    print(f"running as {__spec__.name}")
    for name in sys.argv[1:]:
        print(f"{name}: {validate(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
