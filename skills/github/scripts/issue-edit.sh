#!/bin/sh
# github/issue-edit: Change an issue's title, body or labels.
set -eu
. "$SKILL_DIR/lib/common.sh"
jq -c -f "$SKILL_DIR/lib/issue-edit.body.jq" "$INPUT_PATH" > "$BODY"
gh api --method=PATCH "repos/$in_repo/issues/$in_number" --input="$BODY" > "$RAW"
shape issue-edit
