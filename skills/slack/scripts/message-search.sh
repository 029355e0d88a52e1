#!/bin/sh
# slack/message-search: Search messages (needs a user token); only the allowed channels' hits are returned.
set -eu
. "$SKILL_DIR/lib/common.sh"
auth "${SLACK_USER_TOKEN:?slack: message-search needs SLACK_USER_TOKEN, a user token (xoxp-) with search:read}"
form message-search
call search.messages
shape message-search
