#!/bin/sh
# Fetch one page over HTTPS from a host the band allows, and extract its readable text.
set -eu
url=$(jq -r .url "$INPUT_PATH")
max=$(jq -r '.max_chars // 20000' "$INPUT_PATH")
page="$TMPDIR/page.html"
# -q first: ignore any curlrc. HTTPS only, also after redirects; bounded time and size.
if ! curl -q --silent --show-error --fail --location --proto =https --proto-redir =https \
  --max-redirs 3 --max-time 20 --max-filesize 2097152 --output "$page" -- "$url"; then
  echo "http-fetch: could not fetch $url (a host outside allow.net is refused by the sandbox)" >&2
  exit 1
fi
python3 "$SKILL_DIR/lib/html2text.py" "$page" "$max" "$url" > "$OUTPUT_PATH"
