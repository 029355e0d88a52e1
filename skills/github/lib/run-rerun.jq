# github/run-rerun: the output document
{id, rerun: (if .failed_only then "failed" else "all" end)}
