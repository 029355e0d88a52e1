#!/bin/sh
# github/release-latest: The latest published release, with its notes and assets.
set -eu
. "$SKILL_DIR/lib/common.sh"
gh api --method=GET "repos/$in_repo/releases/latest" > "$RAW"
shape release-latest
