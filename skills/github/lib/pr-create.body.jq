# github/pr-create: the input document → the JSON body gh sends (--input).
{title, head, base, body: (.body // ""), draft: (.draft // false)}
