# elevenlabs/voice-get: the API's answer in /tmp/answer → the script's output document.
{id: .voice_id, name, category: (.category // ""), description: (.description // ""), labels: (.labels // {}), preview_url, settings: (.settings // null)}
