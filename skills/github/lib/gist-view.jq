# github/gist-view: the raw gh output in /tmp/raw.json → the script's output document.
{id, description: (.description // ""), public, url: .html_url, updated_at,
  files: [.files[] | {filename, language, size, truncated, content: (.content // "")}]}
