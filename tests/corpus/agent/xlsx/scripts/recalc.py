#!/usr/bin/env python3
"""Recalculate every formula of a workbook with LibreOffice and report the cells holding errors.

The report is JSON on stdout. Reconstructed for band's tests from the shape of Anthropic's xlsx
skill (skills/xlsx/recalc.py): a StarBasic macro in LibreOffice's user profile recalculates and
saves the workbook, soffice runs it headless under `timeout`, and openpyxl reads the saved values.

Usage: python3 scripts/recalc.py <excel_file> [timeout_seconds]
"""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from office.soffice import get_soffice_env
from openpyxl import load_workbook

PROFILE_BASIC = {
    "Darwin": "~/Library/Application Support/LibreOffice/4/user/basic/Standard",
    "Linux": "~/.config/libreoffice/4/user/basic/Standard",
}
MODULE = "Module1.xba"
MACRO_URL = (
    "vnd.sun.star.script:Standard.Module1.RecalculateAndSave"
    "?language=Basic&location=application"
)
MACRO = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE script:module PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "module.dtd">
<script:module xmlns:script="http://openoffice.org/2000/script" script:name="Module1" script:language="StarBasic">
  Sub RecalculateAndSave()
    ThisComponent.calculateAll()
    ThisComponent.store()
    ThisComponent.close(True)
  End Sub
</script:module>"""
EXCEL_ERRORS = ("#VALUE!", "#DIV/0!", "#REF!", "#NAME?", "#NULL!", "#NUM!", "#N/A")


def install_macro():
    """Put the macro in the user profile, creating the profile first when there is none."""
    basic = Path(os.path.expanduser(PROFILE_BASIC.get(platform.system(), PROFILE_BASIC["Linux"])))
    module = basic / MODULE
    if module.exists() and "RecalculateAndSave" in module.read_text():
        return True
    if not basic.exists():
        subprocess.run(
            ["soffice", "--headless", "--terminate_after_init"],
            capture_output=True,
            timeout=60,
            env=get_soffice_env(),
        )
        basic.mkdir(parents=True, exist_ok=True)
    try:
        module.write_text(MACRO)
    except OSError:
        return False
    return True


def cells(path, data_only):
    book = load_workbook(path, data_only=data_only)
    try:
        for name in book.sheetnames:
            for row in book[name].iter_rows():
                for cell in row:
                    yield name, cell
    finally:
        book.close()


def recalc(path, timeout=30):
    if not Path(path).exists():
        return {"error": f"File {path} does not exist"}
    if not install_macro():
        return {"error": "Failed to setup LibreOffice macro"}
    cmd = ["soffice", "--headless", "--norestore", MACRO_URL, str(Path(path).absolute())]
    if platform.system() == "Linux":
        cmd = ["timeout", str(timeout), *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, env=get_soffice_env())
    # 124: timeout stopped soffice, which had saved the workbook and not exited.
    if done.returncode not in (0, 124):
        return {"error": done.stderr or "Unknown error during recalculation"}
    try:
        found = {err: [] for err in EXCEL_ERRORS}
        for sheet, cell in cells(path, data_only=True):
            if isinstance(cell.value, str):
                err = next((e for e in EXCEL_ERRORS if e in cell.value), None)
                if err:
                    found[err].append(f"{sheet}!{cell.coordinate}")
        total = sum(len(v) for v in found.values())
        formulas = sum(
            1
            for _, cell in cells(path, data_only=False)
            if isinstance(cell.value, str) and cell.value.startswith("=")
        )
    except Exception as e:  # noqa: BLE001 - the report carries any reading error
        return {"error": str(e)}
    return {
        "status": "success" if total == 0 else "errors_found",
        "total_errors": total,
        "error_summary": {
            err: {"count": len(at), "locations": at[:20]} for err, at in found.items() if at
        },
        "total_formulas": formulas,
    }


def main():
    if len(sys.argv) < 2:
        print("Usage: python3 recalc.py <excel_file> [timeout_seconds]")
        print("Recalculates every formula with LibreOffice and prints a JSON report of errors.")
        sys.exit(1)
    timeout = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    print(json.dumps(recalc(sys.argv[1], timeout), indent=2))


if __name__ == "__main__":
    main()
