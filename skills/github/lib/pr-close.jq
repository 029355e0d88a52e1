# github/pr-close: the raw gh output in /tmp/raw.json → the script's output document.
{number, state, url: .html_url}
