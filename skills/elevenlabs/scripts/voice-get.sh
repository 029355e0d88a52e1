#!/bin/sh
# elevenlabs/voice-get: One voice: name, category, labels, settings.
set -eu
. "$SKILL_DIR/lib/common.sh"
get "voices/$in_voice_id"
shape voice-get
