# github/label-create: the raw gh output in /tmp/raw.json → the script's output document.
{name, color, description: (.description // ""), url}
