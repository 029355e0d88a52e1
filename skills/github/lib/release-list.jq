# github/release-list: the raw gh output in /tmp/raw.json → the script's output document.
{releases: map({tag: .tag_name, name: (.name // ""), draft, prerelease, published_at, url: .html_url})}
