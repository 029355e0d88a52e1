# github/pr-review: the raw gh output in /tmp/raw.json → the script's output document.
{id, state, url: .html_url}
