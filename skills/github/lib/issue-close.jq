# github/issue-close: the raw gh output in /tmp/raw.json → the script's output document.
{number, state, state_reason, url: .html_url}
