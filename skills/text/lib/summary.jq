# The tab-separated records of summary.awk, as the output document of text/summary.
split("\n")
| map(select(length > 0) | split("\t"))
| (.[0][1] | tonumber) as $total
| [.[1:][] | {index: (.[0] | tonumber), score: (.[1] | tonumber), text: (.[2:] | join("\t"))}] as $picked
| {summary: ([$picked[].text] | join(" ")), sentences: $picked, total_sentences: $total}
