#!/bin/sh
# elevenlabs/speech: Text to speech: an mp3 under out/ in the workspace.
set -eu
. "$SKILL_DIR/lib/common.sh"
body speech
audio "text-to-speech/$in_voice_id?output_format=${in_format:-mp3_44100_128}"
save
