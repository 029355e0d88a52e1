# slack/thread-list: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| {messages: [.messages[] | {ts, user: (.user // .bot_id // ""), text: (.text // ""), thread_ts: (.thread_ts // ""), replies: (.reply_count // 0)}], more: (.has_more // false)}
