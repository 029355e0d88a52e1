# Every value the user's filter produced (slurped), as the output document of json-transform/apply.
{results: .}
