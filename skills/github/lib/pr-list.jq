# github/pr-list: the raw gh output in /tmp/raw.json → the script's output document.
{pull_requests: map({number, title, state: (.state | ascii_downcase), author: .author.login, draft: .isDraft,
  head: .headRefName, base: .baseRefName, url, created_at: .createdAt})}
