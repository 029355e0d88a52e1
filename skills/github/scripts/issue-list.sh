#!/bin/sh
# github/issue-list: List the issues of a repository.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh issue list --repo="$in_repo" --state="${in_state:-open}" --limit="${in_limit:-30}" \
  --json=number,title,state,author,labels,url,createdAt,updatedAt --search="${in_search:-}" > "$RAW"
shape issue-list
