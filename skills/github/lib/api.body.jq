# github/api: the input document → the JSON body gh sends (--input).
(.fields // {})
