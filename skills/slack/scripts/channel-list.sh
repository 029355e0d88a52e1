#!/bin/sh
# slack/channel-list: The channels the bot can see, each marked allowed or not.
set -eu
. "$SKILL_DIR/lib/common.sh"
auth "$SLACK_BOT_TOKEN"
form channel-list
call conversations.list
shape channel-list
