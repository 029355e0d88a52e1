#!/bin/sh
# github/issue-view: One issue with its body and comments.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh issue view --repo="$in_repo" --json=number,title,state,author,labels,url,body,createdAt,closedAt,comments -- "$in_number" > "$RAW"
shape issue-view
