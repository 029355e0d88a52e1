# slack/user-info: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| .user | {id, name, real_name: (.real_name // .profile.real_name // ""), tz: (.tz // ""), bot: (.is_bot // false)}
