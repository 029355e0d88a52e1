#!/bin/sh
# slack/message-list: Recent messages of a channel, newest first.
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form message-list
call conversations.history
shape message-list
