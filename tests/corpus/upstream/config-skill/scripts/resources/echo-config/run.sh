#!/bin/bash
# Echo the band config back, with the input's name.
NAME=$(jq -r '.name // "world"' "$INPUT_PATH")
jq --arg name "$NAME" '{config: ., name: $name}' "$CONFIG_PATH" > "$OUTPUT_PATH"
