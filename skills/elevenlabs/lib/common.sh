# Sourced by every elevenlabs script: the input as shell variables, the key as a header file,
# one curl shape for reading and one for making audio.
umask 077
eval "$(jq -r -f "$SKILL_DIR/lib/args.jq" "$INPUT_PATH")"
ANSWER="$TMPDIR/answer" BODY="$TMPDIR/body.json" AUTH="$TMPDIR/auth"
API=https://api.elevenlabs.io/v1
# The key goes in a file curl reads (--header @file), never in an argument.
printf 'xi-api-key: %s\n' "$ELEVENLABS_API_KEY" > "$AUTH"

# failed: print the API's error (or curl's) and stop.
failed() {
  if [ -s "$ANSWER" ]; then jq -r -f "$SKILL_DIR/lib/error.jq" "$ANSWER" >&2 || true; fi
  exit 1
}
# get PATH: GET $API/PATH into $ANSWER.
get() {
  curl --silent --show-error --fail-with-body --max-time 30 --header "@$AUTH" --output "$ANSWER" "$API/$1" || failed
}
# shape NAME: the answer → the output document, by lib/NAME.jq.
shape() {
  jq -c -f "$SKILL_DIR/lib/$1.jq" "$ANSWER" > "$OUTPUT_PATH"
}
# body NAME: the JSON body, from the input, by lib/NAME.body.jq.
body() {
  jq -c -f "$SKILL_DIR/lib/$1.body.jq" "$INPUT_PATH" > "$BODY"
}
# audio PATH: POST the body to $API/PATH; the audio (or the error) goes to $ANSWER.
audio() {
  curl --silent --show-error --fail-with-body --max-time 120 --header "@$AUTH" \
    "--header=Content-Type: application/json" --data-binary "@$BODY" --output "$ANSWER" "$API/$1" || failed
}
# save: copy the audio to the workspace path the input names (under out/), and describe it.
save() {
  mkdir -p "$WORKSPACE/out"
  cp "$ANSWER" "$WORKSPACE/$in_out"
  jq -c --arg bytes "$(wc -c < "$ANSWER")" -f "$SKILL_DIR/lib/audio.jq" "$INPUT_PATH" > "$OUTPUT_PATH"
}
