# elevenlabs/voice-list: the API's answer in /tmp/answer → the script's output document.
{voices: [.voices[] | {id: .voice_id, name, category: (.category // ""), description: (.description // ""), labels: (.labels // {}), preview_url}]}
