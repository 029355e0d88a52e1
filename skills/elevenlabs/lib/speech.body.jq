# elevenlabs/speech: the input document → the JSON body sent (/tmp/body.json).
{text, model_id: (.model_id // "eleven_multilingual_v2")}
  + if .stability or .similarity then {voice_settings: {stability: (.stability // 0.5), similarity_boost: (.similarity // 0.75)}} else {} end
