# slack/channel-info: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| .channel | {id, name, private: .is_private, archived: .is_archived, members: (.num_members // 0), topic: (.topic.value // ""), purpose: (.purpose.value // "")}
