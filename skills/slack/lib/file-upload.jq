# slack/file-upload: Slack's answer in /tmp/raw.json → the script's output document.
# $input: the input document; $config: the band's config block (both slurped).
if .ok != true then error("slack API: \(.error // "no answer")") else . end
| ($config[0].channels // []) as $allowed
| {file_id: .files[0].id, title: (.files[0].title // ""), channel: $input[0].channel}
