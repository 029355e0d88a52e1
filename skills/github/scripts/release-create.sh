#!/bin/sh
# github/release-create: Create a release (and its tag).
set -eu
. "$SKILL_DIR/lib/common.sh"
jq -c -f "$SKILL_DIR/lib/release-create.body.jq" "$INPUT_PATH" > "$BODY"
gh api --method=POST "repos/$in_repo/releases" --input="$BODY" > "$RAW"
shape release-create
