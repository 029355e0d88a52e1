# github/search-issues: the raw gh output in /tmp/raw.json → the script's output document.
{issues: map({repo: .repository.nameWithOwner, number, title, state: (.state | ascii_downcase),
  author: .author.login, pull_request: .isPullRequest, url, created_at: .createdAt})}
