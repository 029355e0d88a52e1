#!/bin/sh
# slack/user-info: Who a user id is: name, real name, time zone, bot or not.
set -eu
. "$SKILL_DIR/lib/common.sh"
auth "$SLACK_BOT_TOKEN"
form user-info
call users.info
shape user-info
