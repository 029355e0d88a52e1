# github/repo-view: the raw gh output in /tmp/raw.json → the script's output document.
{name: .nameWithOwner, description: (.description // ""), url, stars: .stargazerCount, forks: .forkCount,
  default_branch: .defaultBranchRef.name, license: (.licenseInfo.key? // null),
  language: (.primaryLanguage.name? // null), archived: .isArchived, updated_at: .updatedAt}
