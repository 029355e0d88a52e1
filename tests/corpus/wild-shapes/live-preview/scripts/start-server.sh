#!/usr/bin/env bash
# Start the preview server in the background and print its port.
set -e
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ID=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
STATE="$PWD/.preview"
mkdir -p "$STATE"
chmod 700 "$STATE"
case "$(uname -s)" in
  Darwin) OPEN=open ;;
  *) OPEN=xdg-open ;;
esac
nohup node "$DIR/server.cjs" --id="$ID" > "$STATE/server.log" 2>&1 &
echo "{\"type\":\"server-started\",\"id\":\"$ID\",\"open\":\"$OPEN\"}"
