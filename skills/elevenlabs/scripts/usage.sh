#!/bin/sh
# elevenlabs/usage: The subscription: tier, characters used and left, when the count resets.
set -eu
. "$SKILL_DIR/lib/common.sh"
get user/subscription
shape usage
