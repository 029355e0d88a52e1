#!/bin/sh
# github/issue-create: Open an issue.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=POST "repos/$in_repo/issues" --raw-field="title=$in_title" --raw-field="body=${in_body:-}" > "$RAW"
shape issue-create
