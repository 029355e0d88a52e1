# github/issue-comment: the raw gh output in /tmp/raw.json → the script's output document.
{id, url: .html_url, created_at}
