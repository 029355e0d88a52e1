#!/bin/sh
# github/pr-create: Open a pull request.
set -eu
. "$SKILL_DIR/lib/common.sh"
jq -c -f "$SKILL_DIR/lib/pr-create.body.jq" "$INPUT_PATH" > "$BODY"
gh api --method=POST "repos/$in_repo/pulls" --input="$BODY" > "$RAW"
shape pr-create
