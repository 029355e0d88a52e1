# github/gist-list: the raw gh output in /tmp/raw.json → the script's output document.
{gists: map({id, description: (.description // ""), public, files: (.files | keys), url: .html_url, updated_at})}
