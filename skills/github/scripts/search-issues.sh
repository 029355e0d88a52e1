#!/bin/sh
# github/search-issues: Search issues and pull requests across GitHub.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh search issues --limit="${in_limit:-30}" --json=repository,number,title,state,author,isPullRequest,url,createdAt -- "$in_query" > "$RAW"
shape search-issues
