# slack/message-search: the input document → the form Slack receives (/tmp/form).
{query, count: (.limit // 20), sort: "timestamp"}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
