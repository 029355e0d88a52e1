#!/bin/bash
INPUT=$(cat "$INPUT_PATH")
HOST_FILE=$(echo "$INPUT" | jq -r '.host_file')
echo "written inside" > /tmp/x
READ_BACK=$(cat /tmp/x)
if HOST=$(cat "$HOST_FILE" 2>/dev/null); then SEEN=true; else SEEN=false; HOST=""; fi
jq -n --arg r "$READ_BACK" --argjson seen "$SEEN" --arg host "$HOST" --arg home "$HOME" \
  '{read_back: $r, host_file_visible: $seen, host_content: $host, home: $home}' > "$OUTPUT_PATH"
