# github/pr-view: the raw gh output in /tmp/raw.json → the script's output document.
{number, title, state: (.state | ascii_downcase), author: .author.login, body: (.body // ""), draft: .isDraft,
  head: .headRefName, base: .baseRefName, mergeable: (.mergeable | ascii_downcase),
  review_decision: ((.reviewDecision // "") | ascii_downcase), additions, deletions,
  changed_files: .changedFiles, url}
