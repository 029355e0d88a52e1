# slack/file-upload, step 3: share the uploaded file $file_id in the channel.
{files: ([{id: $file_id, title: (.title // (.path | split("/") | last))}] | tojson), channel_id: .channel, initial_comment: .comment}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
