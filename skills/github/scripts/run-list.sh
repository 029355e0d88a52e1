#!/bin/sh
# github/run-list: Recent GitHub Actions workflow runs.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/actions/runs" --raw-field="per_page=${in_limit:-30}" > "$RAW"
shape run-list
