#!/bin/sh
# slack/thread-list: The replies of a thread (the parent first).
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
auth "$SLACK_BOT_TOKEN"
form thread-list
call conversations.replies
shape thread-list
