#!/bin/sh
# slack/file-upload: Upload a workspace file from out/ to a channel.
set -eu
. "$SKILL_DIR/lib/common.sh"
allow_channel "$in_channel"
file="$WORKSPACE/$in_path"
bytes=$(wc -c < "$file")
auth "$SLACK_BOT_TOKEN"
jq -j --arg length "$bytes" -f "$SKILL_DIR/lib/file-upload.form.jq" "$INPUT_PATH" > "$FORM"
call files.getUploadURLExternal
eval "$(jq -r -f "$SKILL_DIR/lib/upload-url.jq" "$RAW")"
curl --silent --show-error --max-time 120 --fail --data-binary "@$file" --output "$TMPDIR/upload.txt" "$upload_url"
jq -j --arg file_id "$file_id" -f "$SKILL_DIR/lib/file-complete.form.jq" "$INPUT_PATH" > "$FORM"
call files.completeUploadExternal
shape file-upload
