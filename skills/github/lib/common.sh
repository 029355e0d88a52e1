# Sourced by every github script: gh settings, the input as shell variables, the shaping step.
# gh reads GITHUB_TOKEN (a secret of this band) from the environment; it keeps its config in the
# run's /tmp and never prompts or checks for updates.
export GH_CONFIG_DIR="$TMPDIR/gh" GH_PROMPT_DISABLED=1 GH_NO_UPDATE_NOTIFIER=1 NO_COLOR=1
eval "$(jq -r -f "$SKILL_DIR/lib/args.jq" "$INPUT_PATH")"
RAW="$TMPDIR/raw.json"
# The JSON body of a write call, built from the input by lib/<script>.body.jq (sent with --input).
BODY="$TMPDIR/body.json"

# shape NAME: turn gh's raw output into the script's output document with lib/NAME.jq.
shape() {
  jq -c -f "$SKILL_DIR/lib/$1.jq" "$RAW" > "$OUTPUT_PATH"
}
