#!/bin/sh
# github/pr-checks: The checks (CI runs and statuses) of a pull request's head commit.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh pr view --repo="$in_repo" --json=statusCheckRollup -- "$in_number" > "$RAW"
shape pr-checks
