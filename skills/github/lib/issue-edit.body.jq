# github/issue-edit: the input document → the JSON body gh sends (--input).
{title, body, labels} | with_entries(select(.value != null))
