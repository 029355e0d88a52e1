# github/release-create: the raw gh output in /tmp/raw.json → the script's output document.
{id, tag: .tag_name, name: (.name // ""), draft, prerelease, url: .html_url}
