#!/bin/sh
# github/release-list: List the releases of a repository, newest first.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/releases" --raw-field="per_page=${in_limit:-30}" > "$RAW"
shape release-list
