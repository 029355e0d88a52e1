# github/label-create: the input document → the JSON body gh sends (--input).
{name, color: (.hex_color // "ededed"), description: (.description // "")}
