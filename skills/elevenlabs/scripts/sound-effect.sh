#!/bin/sh
# elevenlabs/sound-effect: A sound effect from a description: an mp3 under out/ in the workspace.
set -eu
. "$SKILL_DIR/lib/common.sh"
body sound-effect
audio sound-generation
save
