#!/bin/bash
# Count words, lines and characters of the input's `text` field.
set -euo pipefail
text=$(sed -n 's/.*"text":"\(.*\)".*/\1/p' "$INPUT_PATH" | sed 's/\\n/\n/g')
words=$(printf '%s' "$text" | wc -w | tr -d ' ')
lines=$(printf '%s\n' "$text" | wc -l | tr -d ' ')
chars=$(printf '%s' "$text" | wc -m | tr -d ' ')
printf '{"words":%s,"lines":%s,"chars":%s}\n' "$words" "$lines" "$chars" > "$OUTPUT_PATH"
