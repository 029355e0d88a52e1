# slack/channel-list: the input document → the form Slack receives (/tmp/form).
{types: "public_channel,private_channel", exclude_archived: true, limit: (.limit // 100)}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
