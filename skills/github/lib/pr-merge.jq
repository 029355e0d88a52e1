# github/pr-merge: the raw gh output in /tmp/raw.json → the script's output document.
{merged, sha, message}
