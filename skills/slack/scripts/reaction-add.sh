#!/bin/sh
# slack/reaction-add: Add an emoji reaction on a message.
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form reaction-add
call reactions.add
shape reaction
