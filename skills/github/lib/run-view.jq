# github/run-view: the raw gh output in /tmp/raw.json → the script's output document.
{id, name: (.name // ""), title: (.display_title // ""), status, conclusion, branch: (.head_branch // ""), event, url: .html_url, created_at, sha: .head_sha, attempt: .run_attempt, updated_at}
