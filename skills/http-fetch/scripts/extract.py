#!/usr/bin/env python3
"""http-fetch/extract: readable text from HTML passed in the input (no network)."""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.environ["SKILL_DIR"], "lib"))
from html2text import extract  # noqa: E402

with open(os.environ["INPUT_PATH"], encoding="utf-8") as f:
    args = json.load(f)
doc = extract(args["html"], args.get("max_chars", 20000))
with open(os.environ["OUTPUT_PATH"], "w", encoding="utf-8") as f:
    json.dump(doc, f)
