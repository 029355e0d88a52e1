#!/bin/sh
# Apply the input's jq `filter` to `data` (JSON in the input) or to the workspace file `path`.
# Every jq call below matches one allow.cli pattern of BAND.md exactly; the filter is always one
# argument that cannot be read as an option.
set -eu
filter=$(jq -r .filter "$INPUT_PATH")
case $filter in
  -*) echo "json-transform: a filter must not start with '-'" >&2; exit 2 ;;
esac
path=$(jq -r '.path//empty' "$INPUT_PATH")
if [ -n "$path" ]; then
  src="$WORKSPACE/$path"
else
  src="$TMPDIR/data.json"
  jq -c .data "$INPUT_PATH" > "$src"
fi
jq -c "$filter" "$src" > "$TMPDIR/results"
jq -s -c -f "$SKILL_DIR/lib/wrap.jq" "$TMPDIR/results" > "$OUTPUT_PATH"
