# Sourced by both summarize scripts: the key as a header file, one call to the Messages API,
# the answer shaped.
umask 077
BODY="$TMPDIR/body.json" ANSWER="$TMPDIR/answer" HEADERS="$TMPDIR/headers"
# The key goes in a file curl reads (--header @file), never in an argument.
printf 'x-api-key: %s\nanthropic-version: 2023-06-01\ncontent-type: application/json\n' "$ANTHROPIC_API_KEY" > "$HEADERS"

# summarize DOC: build the request from the input and the document at DOC (as the sandbox sees
# it), ask the model, write the output document.
summarize() {
  jq -c --rawfile doc "$1" -f "$SKILL_DIR/lib/body.jq" "$INPUT_PATH" > "$BODY"
  if ! curl --silent --show-error --fail-with-body --max-time 120 --header "@$HEADERS" \
      --data-binary "@$BODY" --output "$ANSWER" https://api.anthropic.com/v1/messages; then
    if [ -s "$ANSWER" ]; then jq -r -f "$SKILL_DIR/lib/error.jq" "$ANSWER" >&2 || true; fi
    exit 1
  fi
  jq -c --rawfile doc "$1" -f "$SKILL_DIR/lib/answer.jq" "$ANSWER" > "$OUTPUT_PATH"
}
