#!/bin/bash
INPUT=$(cat "$INPUT_PATH")
REPO=$(echo "$INPUT" | jq -r '.repo')
NUMBER=$(echo "$INPUT" | jq -r '.number')

STDERR_FILE=$(mktemp)
RESULT=$(gh pr view "$NUMBER" -R "$REPO" --json number,title,state,author,body,url,mergeable,headRefName,baseRefName 2>"$STDERR_FILE") || {
  ERROR=$(cat "$STDERR_FILE")
  rm -f "$STDERR_FILE"
  echo "{\"error\": \"$ERROR\"}" > "${OUTPUT_PATH:-/dev/stdout}"
  exit 1
}
rm -f "$STDERR_FILE"
echo "$RESULT" > "${OUTPUT_PATH:-/dev/stdout}"
