#!/usr/bin/env python3
"""Recalculate a workbook's formulas with LibreOffice, then report cells holding errors."""
import json
import subprocess
import sys

from openpyxl import load_workbook

path = sys.argv[1]
subprocess.run(["soffice", "--headless", "--convert-to", "xlsx", "--outdir", ".", path], check=True)
errors = []
for sheet in load_workbook(path, data_only=True):
    for row in sheet.iter_rows():
        errors += [f"{sheet.title}!{c.coordinate}" for c in row if str(c.value).startswith("#")]
print(json.dumps({"status": "errors_found" if errors else "success", "errors": errors}))
