# elevenlabs/speech, sound-effect: the input document and the audio's size ($bytes) → the output document.
{path: .out, bytes: ($bytes | tonumber), format: (.format // "mp3_44100_128")}
