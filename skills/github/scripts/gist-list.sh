#!/bin/sh
# github/gist-list: Your gists, newest first.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET gists --raw-field="per_page=${in_limit:-30}" > "$RAW"
shape gist-list
