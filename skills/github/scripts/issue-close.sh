#!/bin/sh
# github/issue-close: Close an issue.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=PATCH "repos/$in_repo/issues/$in_number" --raw-field=state=closed \
  --raw-field="state_reason=${in_reason:-completed}" > "$RAW"
shape issue-close
