#!/bin/sh
# github/pr-merge: Merge a pull request.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=PUT "repos/$in_repo/pulls/$in_number/merge" --raw-field="merge_method=${in_method:-merge}" > "$RAW"
shape pr-merge
