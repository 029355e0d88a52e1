#!/bin/sh
# github/label-create: Create a label.
set -eu
. "$SKILL_DIR/lib/common.sh"
jq -c -f "$SKILL_DIR/lib/label-create.body.jq" "$INPUT_PATH" > "$BODY"
gh api --method=POST "repos/$in_repo/labels" --input="$BODY" > "$RAW"
shape label-create
