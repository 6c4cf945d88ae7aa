"""Converse: a spoken conversation with a voice agent, and where each millisecond of the silence after the person
stops goes (docs/converse.md). Pipeline mode (listen → reply → speak, turn by turn) and native mode (one
speech-to-speech session).

- script.py    parse_script(text) -> Script: the scripted reply's rules (`PATTERN => REPLY`, `default`, `#`)
- reply.py     ReplyStage: ChatReply (any OpenAI-compatible streaming /v1/chat/completions) and ScriptedReply
- bargein.py   SpeechStart (an energy voice detector), microphone(), Reply: barge-in stops the agent's reply
- pipeline.py  converse(inputs, ...) -> Conversation: the turns on one clock, voice-to-voice, the stereo WAV
- native.py    Native: the duplex session (a WebSocket URL, or any channel a SessionOpener opens)
- sagemaker.py EndpointReply (the reply through a response stream), EndpointSession (native mode over HTTP/2)
"""
