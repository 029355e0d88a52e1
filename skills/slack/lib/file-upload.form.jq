# slack/file-upload, step 1: ask for an upload URL for a file of $length bytes.
{filename: (.path | split("/") | last), length: $length}
| to_entries | map(select(.value != null) | "\(.key)=\(.value | tostring | @uri)") | join("&")
