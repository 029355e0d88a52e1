# slack/thread-list: the input document → the form Slack receives (/tmp/form).
{channel, ts: .thread_ts, limit: (.limit // 50)}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
