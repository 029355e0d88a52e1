#!/bin/sh
# Summarise the input's `text`: keep the `sentences` best-scoring sentences, in text order.
# The scoring is in lib/summary.awk; lib/summary.jq turns its records into the output document.
set -eu
n=$(jq -r '.sentences // 3' "$INPUT_PATH")
jq -j .text "$INPUT_PATH" \
  | awk -v "n=$n" -f "$SKILL_DIR/lib/summary.awk" \
  | jq -R -s -c -f "$SKILL_DIR/lib/summary.jq" > "$OUTPUT_PATH"
