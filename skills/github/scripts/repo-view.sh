#!/bin/sh
# github/repo-view: A repository's description, stars, forks, default branch, licence and language.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh repo view --json=nameWithOwner,description,url,stargazerCount,forkCount,defaultBranchRef,licenseInfo,primaryLanguage,isArchived,updatedAt -- "$in_repo" > "$RAW"
shape repo-view
