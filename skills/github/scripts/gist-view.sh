#!/bin/sh
# github/gist-view: One gist with its files' contents.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "gists/$in_id" > "$RAW"
shape gist-view
