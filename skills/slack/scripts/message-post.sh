#!/bin/sh
# slack/message-post: Post a message to a channel.
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form message-post
call chat.postMessage
shape message-post
