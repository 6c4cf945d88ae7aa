"""Voice's load part: each request one full streaming session through `SpeechClient.say` — the same SpeechSession
the Voice page uses (session.config, the text, input.done, every event to session.done). First audio (TTFA, from
input.done), audio seconds and RTF are the session's own figures; a level adds its RTF p50."""

from __future__ import annotations

from typing import Any

from services.load.family import Failed, LoadFamily, UnitOfWork, WorkInput, rounded
from services.speech import speakable, speech_config
from services.stats import summary

DEFAULT_TEXT = ("Thanks for calling. Your order shipped this morning, and it should arrive on Thursday. "
                "Is there anything else I can help you with?")


class VoiceLoad(LoadFamily):
    name = "voice"
    work_fields = ("text", "voice", "language")
    inputs = (WorkInput("text", "Text each session speaks", DEFAULT_TEXT, kind="area", key="cap_text", height=90,
                        flag="text", flag_help="the text each session speaks"),)
    work_figure = "audio_s"
    level_columns = {"rtf_p50": ("RTF p50", "{:.3f}")}
    slo_example = "ttfa 300ms"

    def fill(self, work: dict[str, Any], recording: Any | None) -> dict[str, Any]:
        work.setdefault("text", DEFAULT_TEXT)
        work["text"] = speakable(work["text"])  # checked once: every request of the run relies on it
        speech_config(voice=work.get("voice"), language=work.get("language"))
        return work

    async def unit(self, backend: Any, plan: Any, target: Any, pool: Any) -> UnitOfWork:
        config = speech_config(voice=plan.work.get("voice"), language=plan.work.get("language"))
        text = plan.work["text"]

        async def send() -> dict[str, Any]:
            speech = backend.client("voice")
            session = speech.open(config)
            utterance = await speech.say(config, text, session=session)
            st = utterance.stats
            figures = {"ttfa_ms": rounded(st.ttfa_ms, 2), "bytes": st.bytes, "audio_s": rounded(st.audio_seconds),
                       "rtf": rounded(st.rtf)}
            if utterance.error is not None:
                raise Failed(utterance.error, figures)
            return figures

        return UnitOfWork(send)

    def level_figures(self, samples: tuple[Any, ...]) -> dict[str, Any]:
        return {"rtf_p50": summary((s.rtf for s in samples if s.ok), digits=4)["p50"]}
