# slack/message-post: the input document → the form Slack receives (/tmp/form).
{channel, text, unfurl_links: false}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
