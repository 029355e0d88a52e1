# The Messages API's answer in /tmp/answer and the summarized text ($doc) → the output document.
{summary: ([.content[] | select(.type == "text") | .text] | join("\n")),
 model, stop_reason,
 input_tokens: .usage.input_tokens, output_tokens: .usage.output_tokens,
 chars: ($doc | length), truncated: ($doc | length > 400000)}
