#!/bin/bash

# Exit on error
set -e

# Create a web artifact project from the template.
NAME="${1:?usage: init-artifact.sh NAME}"
NODE_MAJOR=$(node -v | cut -d. -f1 | tr -d v)
if ! command -v pnpm >/dev/null 2>&1; then
  echo "pnpm not found. Installing pnpm..."
  npm install -g pnpm
fi
mkdir -p "$NAME"
tar -xzf "$(dirname "$0")/components.tar.gz" -C "$NAME"
echo "created $NAME with node $NODE_MAJOR"
