# github/pr-create: the raw gh output in /tmp/raw.json → the script's output document.
{number, url: .html_url, state, draft, head: .head.ref, base: .base.ref}
