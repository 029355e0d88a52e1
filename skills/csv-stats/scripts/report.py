#!/usr/bin/env python3
"""csv-stats/report: write a Markdown report (and an SVG histogram) of a CSV file to out/."""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.environ["SKILL_DIR"], "lib"))
import csvstats  # noqa: E402


def write(rel, text):
    path = os.path.join(os.environ.get("WORKSPACE", "/workspace"), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    with open(os.environ["INPUT_PATH"], encoding="utf-8") as f:
        args = json.load(f)
    rel, delimiter = args["path"], args.get("delimiter", ",")
    stem = os.path.splitext(os.path.basename(rel))[0]
    try:
        doc = csvstats.describe(rel, delimiter)
        numeric = [c["name"] for c in doc["columns"] if c["type"] == "number"]
        column = args.get("chart_column") or (numeric[0] if numeric else None)
        values = csvstats.numeric_values(rel, delimiter, column) if column else []
        if column and not values:
            raise csvstats.InputError(f"{rel}: column {column!r} has no numbers to chart")
    except csvstats.InputError as e:
        print(f"csv-stats: {e}", file=sys.stderr)
        return 1
    report = f"out/{stem}.md"
    write(report, csvstats.markdown(doc))
    chart = None
    if column:
        chart = f"out/{stem}.svg"
        write(chart, csvstats.histogram_svg(f"{stem}: {column}", values))
    result = {"path": rel, "rows": doc["rows"], "report": report, "chart": chart, "chart_column": column}
    with open(os.environ["OUTPUT_PATH"], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


sys.exit(main())
