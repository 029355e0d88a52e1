#!/bin/sh
# elevenlabs/model-list: The models, and which can speak which languages.
set -eu
. "$SKILL_DIR/lib/common.sh"
get models
shape model-list
