#!/bin/sh
# github/run-view: One workflow run: status, conclusion, commit, attempt.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/actions/runs/$in_id" > "$RAW"
shape run-view
