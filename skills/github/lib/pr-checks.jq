# github/pr-checks: the raw gh output in /tmp/raw.json → the script's output document.
# Check runs (GitHub Actions) and commit statuses (other CI) in one list.
{checks: [.statusCheckRollup[] | if .__typename == "StatusContext"
  then {name: .context, status: "completed", conclusion: (.state | ascii_downcase), url: (.targetUrl // "")}
  else {name, status: (.status | ascii_downcase), conclusion: ((.conclusion // "") | ascii_downcase), url: (.detailsUrl // "")} end]}
