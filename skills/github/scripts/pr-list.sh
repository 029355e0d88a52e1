#!/bin/sh
# github/pr-list: List the pull requests of a repository.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh pr list --repo="$in_repo" --state="${in_state:-open}" --limit="${in_limit:-30}" \
  --json=number,title,state,author,isDraft,headRefName,baseRefName,url,createdAt --search="${in_search:-}" > "$RAW"
shape pr-list
