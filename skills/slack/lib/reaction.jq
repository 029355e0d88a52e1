# slack/reaction-add, reaction-remove: Slack's answer (ok or an error) → the output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| {channel: $input[0].channel, ts: $input[0].ts, emoji: $input[0].emoji, done: true}
