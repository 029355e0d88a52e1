# github/search-repos: the raw gh output in /tmp/raw.json → the script's output document.
{repositories: map({name: .fullName, description: (.description // ""), stars: .stargazersCount,
  language: (if (.language // "") == "" then null else .language end), url, updated_at: .updatedAt})}
