#!/bin/sh
# github/issue-reopen: Reopen a closed issue.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=PATCH "repos/$in_repo/issues/$in_number" --raw-field=state=open > "$RAW"
shape issue-reopen
