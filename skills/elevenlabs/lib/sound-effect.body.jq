# elevenlabs/sound-effect: the input document → the JSON body sent (/tmp/body.json).
{text, prompt_influence: (.influence // 0.3)} + if .seconds then {duration_seconds: .seconds} else {} end
