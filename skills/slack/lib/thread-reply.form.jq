# slack/thread-reply: the input document → the form Slack receives (/tmp/form).
{channel, text, thread_ts, reply_broadcast: (.broadcast // false), unfurl_links: false}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
