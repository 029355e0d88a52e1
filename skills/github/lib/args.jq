# The input document as shell assignments, one per line: in_<key>='<value>'. Values are quoted
# with @sh, so `eval` of this output only assigns variables. Keys are checked by the input schema
# (additionalProperties: false) and again here. A string value also comes URL-encoded, as
# in_<key>_uri, for scripts that put it in a path (a label name with spaces).
to_entries[]
| select(.key | test("^[a-z][a-z0-9_]*$"))
| "in_\(.key)=\(.value | if type == "string" then . else tojson end | @sh)",
  (select(.value | type == "string") | "in_\(.key)_uri=\(.value | @uri | @sh)")
