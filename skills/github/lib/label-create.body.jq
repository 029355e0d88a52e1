# github/label-create: the input document → the JSON body gh sends (--input).
{name, color: (.color // "ededed"), description: (.description // "")}
