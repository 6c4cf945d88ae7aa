"""Converse: a spoken conversation with a voice agent, and where each millisecond of the silence after the person
stops goes (docs/converse.md). Pipeline mode (listen → reply → speak, turn by turn) and native mode (one
speech-to-speech session), from recorded turns or live from a microphone.

- script.py      parse_script(text) -> Script: the scripted reply's rules (`PATTERN => REPLY`, `default`, `#`)
- reply.py       ReplyStage: ChatReply (any OpenAI-compatible streaming /v1/chat/completions) and ScriptedReply
- timeline.py    Turn, Conversation: the stages on one clock, voice-to-voice p50/p95 with n, the stereo WAV
- bargein.py     the voice detector (Silero) (SpeechStart, TurnTaking), microphone(), Reply: barge-in stops the agent
- pipeline.py    Pipeline.run(recorded turns) -> Conversation
- native.py      Native: the duplex session (a WebSocket URL, or any channel a SessionOpener opens)
- live.py        LivePipeline, LiveConversation: a live microphone in, the agent played as it comes
- live_native.py LiveNative: native mode over a live microphone
- sagemaker.py   EndpointReply (the reply through a response stream), EndpointSession (native mode over HTTP/2)
- setup.py       Setup: one way to hold a conversation (the page, compare, load and the live call build from it)
- compare.py     compare(inputs, a, b): two setups on the same recorded turns, side by side
"""
