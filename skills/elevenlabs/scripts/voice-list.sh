#!/bin/sh
# elevenlabs/voice-list: The voices this account can use (premade, cloned, library).
set -eu
. "$SKILL_DIR/lib/common.sh"
get voices
shape voice-list
