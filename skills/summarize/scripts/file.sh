#!/bin/sh
# summarize/file: Summarize a text file of the workspace.
set -eu
. "$SKILL_DIR/lib/common.sh"
path=$(jq -r .path "$INPUT_PATH")
summarize "$WORKSPACE/$path"
