#!/usr/bin/env python3
"""Check a form-fields JSON file: no two boxes on a page overlap, entries fit their text."""
import json
import sys


def overlap(a, b):
    return not (a[0] >= b[2] or a[2] <= b[0] or a[1] >= b[3] or a[3] <= b[1])


def check(fields):
    lines = [f"Read {len(fields)} fields"]
    boxes = []
    for f in fields:
        boxes.append((f["page_number"], f["label_bounding_box"], "label", f["description"]))
        boxes.append((f["page_number"], f["entry_bounding_box"], "entry", f["description"]))
    bad = False
    for i, (page, box, kind, name) in enumerate(boxes):
        for page2, box2, kind2, name2 in boxes[i + 1:]:
            if page == page2 and overlap(box, box2):
                bad = True
                lines.append(f"FAILURE: {kind} of `{name}` overlaps {kind2} of `{name2}`")
    lines.append("FAILURE: fix the boxes" if bad else "SUCCESS: All bounding boxes are valid")
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("Usage: check_bounding_boxes.py [fields.json]")
        sys.exit(1)
    with open(sys.argv[1]) as fh:
        print("\n".join(check(json.load(fh)["form_fields"])))
