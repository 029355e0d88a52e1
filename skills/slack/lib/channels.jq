# The band's config block (/band/io/config.json) → the allowed channel ids, one line, space-separated.
(.channels // []) | map(select(test("^[CGD][A-Z0-9]{2,20}$"))) | join(" ")
