# github/label-list: the raw gh output in /tmp/raw.json → the script's output document.
{labels: map({name, color, description: (.description // "")})}
