#!/bin/sh
# github/label-list: The labels of a repository.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/labels" --raw-field="per_page=${in_limit:-30}" > "$RAW"
shape label-list
