#!/bin/sh
# github/gist-delete: Delete a gist.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=DELETE "gists/$in_id" > "$RAW"
jq -c -f "$SKILL_DIR/lib/gist-delete.jq" "$INPUT_PATH" > "$OUTPUT_PATH"
