# github/gist-create: the input document → the JSON body gh sends (--input).
{description: (.description // ""), public: (.public // false), files: (.files | map({key: .name, value: {content}}) | from_entries)}
