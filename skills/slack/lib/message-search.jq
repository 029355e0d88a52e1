# slack/message-search: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| # Hits in channels outside the allow-list are dropped here, so they never reach the output.
{matches: [.messages.matches[] | select(.channel.id as $id | $allowed | any(. == $id))
  | {channel: .channel.id, ts, user: (.user // ""), text: (.text // ""), permalink}]}
