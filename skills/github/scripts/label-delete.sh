#!/bin/sh
# github/label-delete: Delete a label.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=DELETE "repos/$in_repo/labels/$in_name_uri" > "$RAW"
jq -c -f "$SKILL_DIR/lib/label-delete.jq" "$INPUT_PATH" > "$OUTPUT_PATH"
