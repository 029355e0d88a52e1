#!/bin/sh
# github/issue-comment: Comment on an issue or pull request.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=POST "repos/$in_repo/issues/$in_number/comments" --raw-field="body=$in_body" > "$RAW"
shape issue-comment
