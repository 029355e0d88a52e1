# slack/message-list: the input document → the form Slack receives (/tmp/form).
{channel, limit: (.limit // 20), oldest}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
