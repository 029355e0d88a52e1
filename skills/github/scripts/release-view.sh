#!/bin/sh
# github/release-view: One release by tag, with notes and assets.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/releases/tags/$in_tag" > "$RAW"
shape release-latest
