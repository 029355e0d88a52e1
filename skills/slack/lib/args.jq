# The input document as shell assignments, one per line: in_<key>='<value>', quoted with @sh, so
# `eval` of this output only assigns variables. Keys are checked by the input schema too.
to_entries[]
| select(.key | test("^[a-z][a-z0-9_]*$"))
| "in_\(.key)=\(.value | if type == "string" then . else tojson end | @sh)"
