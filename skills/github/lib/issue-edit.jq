# github/issue-edit: the raw gh output in /tmp/raw.json → the script's output document.
{number, title, state, labels: [.labels[].name], url: .html_url}
