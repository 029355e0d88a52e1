#!/bin/bash
set -euo pipefail  # strict mode
# Bundle the artifact into one HTML file.
pnpm exec parcel build index.html --no-source-maps
