#!/bin/sh
# github/search-repos: Search repositories across GitHub.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh search repos --limit="${in_limit:-30}" --json=fullName,description,stargazersCount,language,url,updatedAt -- "$in_query" > "$RAW"
shape search-repos
