# github/issue-view: the raw gh output in /tmp/raw.json → the script's output document.
{number, title, state: (.state | ascii_downcase), author: .author.login, labels: [.labels[].name], url,
  body: (.body // ""), created_at: .createdAt, closed_at: .closedAt,
  comments: [.comments[] | {author: .author.login, body, created_at: .createdAt}]}
