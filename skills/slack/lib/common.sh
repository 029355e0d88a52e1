# Sourced by every slack script: the input as shell variables, the token as a header file, the
# channel allow-list, one form POST per Slack method, the shaping step.
umask 077
eval "$(jq -r -f "$SKILL_DIR/lib/args.jq" "$INPUT_PATH")"
RAW="$TMPDIR/raw.json" FORM="$TMPDIR/form" AUTH="$TMPDIR/auth"

# allow_channel ID: stop unless ID is in the band's config block (slack.channels in BAND.md).
allow_channel() {
  allowed=$(jq -r -f "$SKILL_DIR/lib/channels.jq" "$CONFIG_PATH")
  case " $allowed " in
    *" $1 "*) ;;
    *) echo "slack: channel $1 is not in this skill's channel allow-list (slack.channels in BAND.md; allowed: ${allowed:-none})" >&2
       exit 3 ;;
  esac
}
# auth TOKEN: the Authorization header, in a file curl reads (-H @file), never in an argument.
auth() {
  printf 'Authorization: Bearer %s\n' "$1" > "$AUTH"
}
# form NAME: the form body for this call, from the input, by lib/NAME.form.jq.
form() {
  jq -j -f "$SKILL_DIR/lib/$1.form.jq" "$INPUT_PATH" > "$FORM"
}
# call METHOD: POST the form to https://slack.com/api/METHOD; the answer goes to $RAW.
call() {
  curl --silent --show-error --max-time 30 --header "@$AUTH" --data-binary "@$FORM" --output "$RAW" "https://slack.com/api/$1"
}
# shape NAME: Slack's answer → the output document, by lib/NAME.jq (which stops on an error).
shape() {
  jq -c --slurpfile input "$INPUT_PATH" --slurpfile config "$CONFIG_PATH" -f "$SKILL_DIR/lib/$1.jq" "$RAW" > "$OUTPUT_PATH"
}
