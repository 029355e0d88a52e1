#!/bin/sh
# github/pr-close: Close a pull request without merging.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=PATCH "repos/$in_repo/pulls/$in_number" --raw-field=state=closed > "$RAW"
shape pr-close
