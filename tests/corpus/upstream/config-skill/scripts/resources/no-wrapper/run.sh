#!/bin/bash
# No wrapper, no schema: takes no input.
echo '{"ran": true}' > "$OUTPUT_PATH"
