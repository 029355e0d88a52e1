#!/bin/sh
# summarize/text: Summarize a text given in the input.
set -eu
. "$SKILL_DIR/lib/common.sh"
jq -j .text "$INPUT_PATH" > "$TMPDIR/doc"
summarize "$TMPDIR/doc"
