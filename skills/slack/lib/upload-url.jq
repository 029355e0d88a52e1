# slack/file-upload, step 2: Slack's answer → shell assignments upload_url=… file_id=… (quoted with @sh).
if .ok then "upload_url=\(.upload_url | @sh)\nfile_id=\(.file_id | @sh)" else error("slack API: \(.error)") end
