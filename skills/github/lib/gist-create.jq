# github/gist-create: the raw gh output in /tmp/raw.json → the script's output document.
{id, url: .html_url, public, files: (.files | keys)}
