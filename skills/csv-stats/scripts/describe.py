#!/usr/bin/env python3
"""csv-stats/describe: per-column statistics of a CSV file under data/ in the workspace."""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.environ["SKILL_DIR"], "lib"))
import csvstats  # noqa: E402


def main():
    with open(os.environ["INPUT_PATH"], encoding="utf-8") as f:
        args = json.load(f)
    try:
        doc = csvstats.describe(args["path"], args.get("delimiter", ","))
    except csvstats.InputError as e:
        print(f"csv-stats: {e}", file=sys.stderr)
        return 1
    with open(os.environ["OUTPUT_PATH"], "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return 0


sys.exit(main())
