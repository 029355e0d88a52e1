#!/bin/sh
# Count words, lines and characters of the input's `text` field.
set -eu
text="$TMPDIR/text"
jq -j .text "$INPUT_PATH" > "$text"
words=$(wc -w < "$text" | tr -d ' ')
chars=$(wc -m < "$text" | tr -d ' ')
lines=$(wc -l < "$text" | tr -d ' ')
# A last line without a newline at its end is a line too.
if [ -s "$text" ] && [ "$(tail -c 1 "$text" | wc -l | tr -d ' ')" = 0 ]; then
  lines=$((lines + 1))
fi
printf '{"words":%s,"lines":%s,"chars":%s}\n' "$words" "$lines" "$chars" > "$OUTPUT_PATH"
