#!/bin/sh
# github/run-rerun: Re-run a workflow run (all jobs, or only the failed ones).
set -eu
. "$SKILL_DIR/lib/common.sh"
if [ "${in_failed_only:-false}" = true ]; then what=rerun-failed-jobs; else what=rerun; fi
gh api --method=POST "repos/$in_repo/actions/runs/$in_id/$what" > "$RAW"
jq -c -f "$SKILL_DIR/lib/run-rerun.jq" "$INPUT_PATH" > "$OUTPUT_PATH"
