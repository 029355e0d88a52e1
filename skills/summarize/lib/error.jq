# The API's error answer → one line for stderr.
"summarize: " + (.error.message? // tostring)
