#!/bin/sh
# github/api: Any REST call the other scripts do not cover: GET anywhere under the allowed prefixes, POST/PATCH under a repository's issues, pulls and labels.
set -eu
. "$SKILL_DIR/lib/common.sh"
method=${in_method:-GET}
if [ "$method" = GET ]; then
  gh api --method=GET "$in_path" > "$RAW"
else
  jq -c -f "$SKILL_DIR/lib/api.body.jq" "$INPUT_PATH" > "$BODY"
  gh api "--method=$method" "$in_path" --input="$BODY" > "$RAW"
fi
jq -c -s -f "$SKILL_DIR/lib/api.jq" "$RAW" > "$OUTPUT_PATH"
