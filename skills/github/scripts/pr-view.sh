#!/bin/sh
# github/pr-view: One pull request: description, branches, size, review and merge state.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh pr view --repo="$in_repo" --json=number,title,state,author,body,isDraft,headRefName,baseRefName,mergeable,reviewDecision,additions,deletions,changedFiles,url -- "$in_number" > "$RAW"
shape pr-view
