# github/release-latest: the raw gh output in /tmp/raw.json → the script's output document.
{tag: .tag_name, name: (.name // ""), published_at, url: .html_url, body: (.body // ""),
  assets: [.assets[] | {name, size, downloads: .download_count, url: .browser_download_url}]}
