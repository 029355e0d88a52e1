# github/pr-files: the raw gh output in /tmp/raw.json → the script's output document.
{files: map({filename, status, additions, deletions, changes})}
