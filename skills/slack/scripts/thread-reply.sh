#!/bin/sh
# slack/thread-reply: Reply in a thread (optionally also to the channel).
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form thread-reply
call chat.postMessage
shape message-post
