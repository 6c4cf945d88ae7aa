"""Converse: a spoken conversation with a voice agent, and where each millisecond of the silence after the person
stops goes (docs/converse.md). Pipeline mode only, so far: listen → reply → speak, turn by turn.

- script.py    parse_script(text) -> Script: the scripted reply's rules (`PATTERN => REPLY`, `default`, `#`)
- reply.py     ReplyStage: ChatReply (any OpenAI-compatible streaming /v1/chat/completions) and ScriptedReply
- bargein.py   SpeechStart (an energy voice detector), microphone(), Reply: barge-in stops the agent's reply
- pipeline.py  converse(inputs, ...) -> Conversation: the turns on one clock, voice-to-voice, the stereo WAV
"""
