#!/bin/sh
# slack/reaction-remove: Remove an emoji reaction on a message.
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form reaction-remove
call reactions.remove
shape reaction
