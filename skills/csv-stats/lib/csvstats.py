"""Describe a CSV file: per-column counts, numeric summaries, frequent values; render a report.

Shared by scripts/describe.py and scripts/report.py. Standard library only; no network, no
third-party packages (the sandbox has none).
"""

import csv
import html
import math
import os
import statistics

MAX_TOP = 5


class InputError(Exception):
    """A problem with the input the agent can fix (bad path, not a CSV)."""


def workspace_path(rel, prefix="data/"):
    """The absolute path of `rel` inside the workspace, refusing anything outside `prefix`."""
    norm = os.path.normpath(rel)
    if os.path.isabs(rel) or norm.startswith("..") or not (norm + "/").startswith(prefix):
        raise InputError(f"{rel}: the path must be a file under {prefix} in the workspace")
    return os.path.join(os.environ.get("WORKSPACE", "/workspace"), norm)


def read_rows(path, delimiter):
    """Header and rows of the CSV at `path` (short rows are padded, long rows cut)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, delimiter=delimiter)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path}: the file is empty")
            width = len(header)
            rows = [(row + [""] * width)[:width] for row in reader if row]
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (is it under an allowed read path?)") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: not a readable CSV file: {e}") from None
    return header, rows


def as_number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def clean(x):
    """`x` rounded to 6 significant digits; an int when the result is whole."""
    r = float(f"{x:.6g}")
    return int(r) if r.is_integer() and abs(r) < 2**53 else r


def describe_column(name, values):
    present = [v.strip() for v in values if v.strip() != ""]
    out = {"name": name, "count": len(present), "missing": len(values) - len(present)}
    numbers = [as_number(v) for v in present]
    if present and all(n is not None for n in numbers):
        out["type"] = "number"
        out["min"] = clean(min(numbers))
        out["max"] = clean(max(numbers))
        out["mean"] = clean(statistics.fmean(numbers))
        out["median"] = clean(statistics.median(numbers))
        out["stdev"] = clean(statistics.stdev(numbers)) if len(numbers) > 1 else 0
    else:
        out["type"] = "text" if present else "empty"
    counts = {}
    for v in present:
        counts[v] = counts.get(v, 0) + 1
    out["distinct"] = len(counts)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TOP]
    out["top"] = [{"value": v, "count": c} for v, c in top]
    return out


def describe(rel, delimiter=","):
    """The output document of csv-stats/describe for the workspace file `rel`."""
    header, rows = read_rows(workspace_path(rel), delimiter)
    columns = [describe_column(name, [row[i] for row in rows]) for i, name in enumerate(header)]
    return {"path": rel, "rows": len(rows), "columns": columns}


def numeric_values(rel, delimiter, column):
    header, rows = read_rows(workspace_path(rel), delimiter)
    if column not in header:
        raise InputError(f"{rel}: no column named {column!r} (columns: {', '.join(header)})")
    i = header.index(column)
    return [n for n in (as_number(row[i]) for row in rows if row[i].strip()) if n is not None]


def markdown(doc):
    """A Markdown report of a describe document."""
    lines = [f"# {doc['path']}", "", f"{doc['rows']} rows, {len(doc['columns'])} columns.", ""]
    lines += ["| column | type | count | missing | min | max | mean | median | stdev | distinct |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc["columns"]:
        cells = [c["name"], c["type"], c["count"], c["missing"]]
        cells += [c.get(k, "") for k in ("min", "max", "mean", "median", "stdev")]
        cells.append(c["distinct"])
        lines.append("| " + " | ".join(str(x).replace("|", "\\|") for x in cells) + " |")
    lines.append("")
    for c in doc["columns"]:
        if c["type"] == "text" and c["top"]:
            top = ", ".join(f"`{t['value']}` ({t['count']})" for t in c["top"])
            lines.append(f"- most frequent in **{c['name']}**: {top}")
    return "\n".join(lines).rstrip() + "\n"


def histogram_svg(title, values, bins=10, width=480, height=240):
    """An SVG bar chart of `values` in `bins` equal-width bins."""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / span * bins), bins - 1)] += 1
    top = max(counts) or 1
    pad, bar_w = 30, (width - 60) / bins
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<title>{html.escape(title)}</title>',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-family="sans-serif" '
             f'font-size="13">{html.escape(title)}</text>']
    for i, c in enumerate(counts):
        h = (height - 2 * pad - 10) * c / top
        x, y = pad + i * bar_w, height - pad - h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                     f'fill="#4a7bb7"><title>{c}</title></rect>')
    parts.append(f'<text x="{pad}" y="{height - 10}" font-family="sans-serif" font-size="11">'
                 f'{clean(lo)}</text>')
    parts.append(f'<text x="{width - pad}" y="{height - 10}" text-anchor="end" '
                 f'font-family="sans-serif" font-size="11">{clean(hi)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
