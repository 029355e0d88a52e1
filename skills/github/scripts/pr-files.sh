#!/bin/sh
# github/pr-files: The files a pull request changes (first 100), with line counts.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/pulls/$in_number/files" --raw-field=per_page=100 > "$RAW"
shape pr-files
