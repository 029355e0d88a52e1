# slack/channel-info: the input document → the form Slack receives (/tmp/form).
{channel, include_num_members: true}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
