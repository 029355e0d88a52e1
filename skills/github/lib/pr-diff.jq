# github/pr-diff: the output document
# The first 200000 characters of the diff; say when it is cut.
{diff: .[0:200000], bytes: (. | utf8bytelength), truncated: (length > 200000)}
