#!/bin/sh
# github/pr-review: Approve, request changes on, or comment on a pull request.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=POST "repos/$in_repo/pulls/$in_number/reviews" --raw-field="event=$in_event" --raw-field="body=${in_body:-}" > "$RAW"
shape pr-review
