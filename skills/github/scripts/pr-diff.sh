#!/bin/sh
# github/pr-diff: The unified diff of a pull request.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/pulls/$in_number" "--header=Accept: application/vnd.github.diff" > "$TMPDIR/raw.diff"
jq -R -s -c -f "$SKILL_DIR/lib/pr-diff.jq" "$TMPDIR/raw.diff" > "$OUTPUT_PATH"
