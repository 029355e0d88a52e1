#!/bin/bash
# Shared permission helpers for the Slack scripts; each run.sh sources this file.
set -euo pipefail

CHANNEL_CACHE=$(mktemp "${TMPDIR:-/tmp}/slack-channels-XXXXXX")
trap 'rm -f "$CHANNEL_CACHE"' EXIT

if [ -z "${SLACK_BOT_TOKEN:-}" ]; then
  echo '{"error": "SLACK_BOT_TOKEN is not set"}' > "${OUTPUT_PATH:-/dev/stdout}"
  exit 1
fi

get_perm() { jq -r ".$1 | select(. != null)" "$CONFIG_PATH"; }
get_channel_list() { jq -r ".channels.$1[]?" "$CONFIG_PATH"; }

perms_error() {
  echo "{\"error\": \"Permission denied: $1\"}" > "${OUTPUT_PATH:-/dev/stdout}"
  exit 1
}

check_feature() {
  if [ "$(get_perm "$1")" = "false" ]; then perms_error "$1 is disabled"; fi
}

resolve_channel_id() {
  local ref="$1"
  if echo "$ref" | grep -qE '^[CGD][A-Z0-9]{8,}$'; then echo "$ref"; return; fi
  local name="${ref#\#}"
  if [ ! -s "$CHANNEL_CACHE" ]; then
    local response
    response=$(curl -s -H "Authorization: Bearer $SLACK_BOT_TOKEN" \
      "https://slack.com/api/conversations.list?types=public_channel,private_channel&limit=200")
    if [ "$(echo "$response" | jq -r '.ok')" != "true" ]; then
      echo "{\"error\": \"Failed to list channels: $(echo "$response" | jq -r '.error // "unknown"')\"}" > "${OUTPUT_PATH:-/dev/stdout}"
      exit 1
    fi
    echo "$response" | jq -r '.channels[]? | "\(.id) \(.name // "")"' >> "$CHANNEL_CACHE"
  fi
  local id
  id=$(grep -E " ${name}$" "$CHANNEL_CACHE" | head -1 | awk '{print $1}')
  if [ -z "$id" ]; then
    echo "{\"error\": \"Channel not found: $ref\"}" > "${OUTPUT_PATH:-/dev/stdout}"
    exit 1
  fi
  echo "$id"
}

check_channel() {
  local ref="$1"
  local name="${ref#\#}"
  if [ "$(get_perm dm)" = "false" ] && echo "$ref" | grep -qE '^D[A-Z0-9]{8,}$'; then
    perms_error "direct messages are disabled"
  fi
  local deny_list allow_list
  deny_list=$(get_channel_list deny)
  if [ -n "$deny_list" ] && echo "$deny_list" | grep -qxF "$name"; then
    perms_error "channel #$name is in the deny list"
  fi
  allow_list=$(get_channel_list allow)
  if [ -n "$allow_list" ] && ! echo "$allow_list" | grep -qxF "$name"; then
    perms_error "channel #$name is not in the allow list"
  fi
  resolve_channel_id "$ref"
}

slack_api() {
  local method="$1"
  local body="${2:-{\}}"
  local response
  response=$(curl -s -X POST -H "Authorization: Bearer $SLACK_BOT_TOKEN" \
    -H "Content-Type: application/json" -d "$body" "https://slack.com/api/$method")
  if [ "$(echo "$response" | jq -r '.ok')" != "true" ]; then
    echo "{\"error\": \"Slack API error ($method): $(echo "$response" | jq -r '.error // "unknown"')\"}" > "${OUTPUT_PATH:-/dev/stdout}"
    exit 1
  fi
  echo "$response"
}
