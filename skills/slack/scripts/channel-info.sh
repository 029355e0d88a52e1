#!/bin/sh
# slack/channel-info: One channel: name, topic, purpose, members.
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form channel-info
call conversations.info
shape channel-info
