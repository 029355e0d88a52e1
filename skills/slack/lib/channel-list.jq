# slack/channel-list: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| {channels: [.channels[] | {id, name, private: .is_private, members: (.num_members // 0), topic: (.topic.value // ""),
  allowed: (.id as $id | $allowed | any(. == $id))}]}
