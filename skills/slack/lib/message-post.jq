# slack/message-post: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| {channel, ts, thread_ts: (.message.thread_ts // ""), text: (.message.text // "")}
