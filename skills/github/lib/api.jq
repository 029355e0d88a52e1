# github/api: the raw gh output in /tmp/raw.json (slurped) → the script's output document.
# gh's output read with --slurp: [] for an empty body.
{data: (.[0] // null)}
