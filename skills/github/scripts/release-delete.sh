#!/bin/sh
# github/release-delete: Delete a release (its tag stays).
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/releases/tags/$in_tag" > "$RAW"
id=$(jq -r .id "$RAW")
gh api --method=DELETE "repos/$in_repo/releases/$id" > /dev/null
jq -c -f "$SKILL_DIR/lib/release-delete.jq" "$INPUT_PATH" > "$OUTPUT_PATH"
