#!/usr/bin/env -S uv run --script
# /// script
# requires-python = ">=3.11"
# dependencies = ["rulekit>=1.0"]
# ///
"""Lint rule files: one finding per line."""

import sys

from rules import parse


def main(paths):
    for path in paths:
        with open(path) as f:
            for finding in parse(f.read()):
                print(f"{path}: {finding}")


if __name__ == "__main__":
    main(sys.argv[1:])
