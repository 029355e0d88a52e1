#!/bin/sh
# github/gist-create: Create a gist from text.
set -eu
. "$SKILL_DIR/lib/common.sh"
jq -c -f "$SKILL_DIR/lib/gist-create.body.jq" "$INPUT_PATH" > "$BODY"
gh api --method=POST gists --input="$BODY" > "$RAW"
shape gist-create
