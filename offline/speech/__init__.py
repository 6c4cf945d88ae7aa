"""The offline engine's speech routes, behaving as vLLM-Omni 0.30 does wherever a client can observe it.

- WebSocket `/v1/audio/speech/stream` (docs/protocols.md, "Speech stream"): `session.config` first (within the
  config timeout), any number of `input.text`, `input.done` as a flush that answers `session.done` and
  keeps the socket for the next utterance, `session.close`; per unit `audio.start`, binary audio, and an
  `audio.done` that is always sent. Error texts and which errors end the connection follow vLLM-Omni's
  handler; like it, a connection that ends on an error is dropped without a close frame.
- `POST /v1/audio/speech` (wav, pcm, flac, mp3, opus; raw-audio and SSE streaming). The voices routes are
  in offline.voices.

`routes` declares both routes; `stream` is the WebSocket session, `rest` the REST answers, `checks` the request
checks and style previews they share.

All three Qwen3-TTS task types are served (protocol.speech.OFFLINE_TASK_TYPES), checked with vLLM-Omni's texts
in its order: CustomVoice (a preset voice, optional style `instructions`), VoiceDesign (`instructions`
describe the voice) and Base (cloning from `ref_audio` + `ref_text`, a `speaker_embedding`, or an uploaded
voice's name). A request naming a model is held to that checkpoint's one task type, as a vLLM-Omni server
serving it would be. What the task asks for is previewed on the Piper voice (offline.styles): REST answers say
what was done in the `X-Offline-Preview` header.

A client that goes away (socket closed, HTTP connection dropped, streamed or not) cancels its synthesis:
what is queued for it on the voice's worker is dropped and the chunk being made is the last.

The voice is Piper on CPU (offline.voice: the app's VoiceEngine), standing in for the Qwen3-TTS models the DLC runs.
"""

from offline.speech.routes import router
from offline.speech.stream import CONFIG_TIMEOUT_ENV, IDLE_TIMEOUT_ENV, SpeechStreamHandler

__all__ = ["CONFIG_TIMEOUT_ENV", "IDLE_TIMEOUT_ENV", "SpeechStreamHandler", "router"]
