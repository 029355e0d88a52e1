# The API's error answer → one line for stderr.
"elevenlabs: " + ((.detail.message? // .detail? // .) | if type == "string" then . else tojson end)
