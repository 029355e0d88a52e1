# github/issue-create: the raw gh output in /tmp/raw.json → the script's output document.
{number, url: .html_url, title, state}
