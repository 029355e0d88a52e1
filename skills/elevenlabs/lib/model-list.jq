# elevenlabs/model-list: the API's answer in /tmp/answer → the script's output document.
{models: [.[] | {id: .model_id, name, tts: (.can_do_text_to_speech // false), languages: [(.languages // [])[] | .language_id]}]}
