"""Listen's load part: each request one live stream through the backend's `Listener.stream` — the recording sent
over `/v1/realtime` (the HTTP/2 bidirectional stream on SageMaker) in 100 ms chunks paced at real time. The final
text's latency (from the last audio sent to `transcription.done`), the first partial and the audio seconds are the
transcript's own figures.

The recording is the plan's (`--audio FILE`, an upload on the page), or by default the plan's sentence spoken by the
offline engine's voice, made once before the warm-up — by the target itself when it is the offline engine — and
kept for the process. The SLO, when none is given, is the final text's p95 within a second.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from protocol.errors import InvalidInput
from services.listen import ListenAudio, load_audio
from services.listen.sample import spoken_sample, spoken_sample_at
from services.load.family import LoadFamily, UnitOfWork, WorkInput, rounded
from services.speech import speakable

DEFAULT_TEXT = "Please call me back when you get home tonight, and bring the report from the meeting."


class ListenLoad(LoadFamily):
    name = "listen"
    work_fields = ("text", "language")  # the sentence the offline voice speaks (without a recording given)
    inputs = (
        WorkInput("", "Recording every stream sends at real time (blank: the offline voice says the sentence below)",
                  kind="recording", key="cap_audio", flag="audio", replaces=("text",),
                  flag_help="the recording every stream sends at real time (WAV, MP3, FLAC, OGG, …)",
                  note="The offline voice says the sentence below."),
        WorkInput("text", "Sentence the offline voice speaks", DEFAULT_TEXT, key="cap_listen_text", flag="text",
                  flag_help="the sentence the offline voice speaks for every stream"),
    )
    work_figure = "audio_s"
    default_slo = "final 1000ms"
    slo_example = default_slo

    def fill(self, work: dict[str, Any], recording: ListenAudio | None) -> dict[str, Any]:
        if recording is None:
            work["text"] = speakable(work.get("text", DEFAULT_TEXT))
            return work
        if "text" in work:
            raise InvalidInput("give a listen sweep a recording (--audio FILE) or a sentence for the offline voice to "
                               "speak (--text), not both")
        return work | {"audio": recording.name, "audio_s": round(recording.seconds, 3)}

    async def unit(self, backend: Any, plan: Any, target: Any, pool: Any) -> UnitOfWork:
        audio = plan.recording
        if audio is None:
            url = target.target if target.kind == "offline engine" else None
            audio = await asyncio.get_running_loop().run_in_executor(None, _spoken, plan.work["text"], url)
        language = plan.work.get("language")

        async def send() -> dict[str, Any]:
            t = await backend.client("listen").stream(audio, language=language)
            return {"final_ms": rounded(t.final_ms, 2), "first_partial_ms": rounded(t.first_partial_ms, 2),
                    "partials": t.partials, "audio_s": rounded(audio.seconds), "rtf": rounded(t.rtf),
                    "bytes": len(audio.pcm)}

        return UnitOfWork(send, work={"audio": audio.name, "audio_s": round(audio.seconds, 3)})

    def requests_note(self, plan: Any) -> str:
        return " Each is a live stream that lasts as long as its recording (sent at real time)."


@functools.lru_cache(maxsize=4)
def _spoken(text: str, url: str | None) -> ListenAudio:
    """The sentence a listen sweep streams, spoken once per process (seeded: the same audio every time)."""
    wav = spoken_sample_at(url, text) if url else spoken_sample(text)
    return load_audio(wav, "the offline voice's sentence")
