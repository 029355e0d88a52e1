# elevenlabs/usage: the API's answer in /tmp/answer → the script's output document.
{tier, used: .character_count, limit: .character_limit, left: (.character_limit - .character_count), resets_at: (.next_character_count_reset_unix // null | if . then todate else null end)}
