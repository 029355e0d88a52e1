# github/issue-list: the raw gh output in /tmp/raw.json → the script's output document.
{issues: map({number, title, state: (.state | ascii_downcase), author: .author.login, labels: [.labels[].name], url,
  created_at: .createdAt, updated_at: .updatedAt})}
