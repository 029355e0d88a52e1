# slack/user-info: the input document → the form Slack receives (/tmp/form).
{user}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
