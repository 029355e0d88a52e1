# slack/reaction-add: the input document → the form Slack receives (/tmp/form).
{channel, timestamp: .ts, name: .emoji}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
