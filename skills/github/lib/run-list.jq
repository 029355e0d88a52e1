# github/run-list: the raw gh output in /tmp/raw.json → the script's output document.
{runs: [.workflow_runs[] | {id, name: (.name // ""), title: (.display_title // ""), status, conclusion, branch: (.head_branch // ""), event, url: .html_url, created_at}]}
