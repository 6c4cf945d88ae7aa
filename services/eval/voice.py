"""Voice's part in evaluations: text spoken by a variant's target over the speech WebSocket, rated blind in pairs;
its time to first audio; its intelligibility (the speech heard by a listen target, a WER against the text); a
voice and a language picked from what the target offers; the Voice page's takes as a variant's outputs."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from protocol import limits
from protocol.limits import Range
from services.eval import rated, stats
from services.eval.family import EvalFamily, Kept, KeptChoice, Variant, wer_figures, wer_text

# An evaluation's SPEC (services.eval.spec.EvalSpec) and its items (services.eval.store.Item): named, not imported
# — the registry imports this part, and those modules import the registry.
EvalSpec = Any
Item = Any

INTELLIGIBILITY_COLUMNS = ("intelligibility_wer", "intelligibility_ci95_low", "intelligibility_ci95_high",
                           "intelligibility_n", "intelligibility_words")


class VoiceVariant(Variant):
    EXAMPLE: ClassVar[str] = 'instructions = "slow and warm"\nsplit = "sentence"'  # valid on every target
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {"first_chunk_frames": (limits.FIRST_CHUNK_FRAMES, True)}
    voice: str | None = None
    language: str | None = None
    task_type: Literal["CustomVoice", "VoiceDesign"] | None = None
    instructions: str | None = None
    first_chunk_frames: int | None = None
    split: Literal["none", "sentence", "clause"] = "clause"


class VoiceEval(EvalFamily):
    name = "voice"
    variant = VoiceVariant
    makes = "audio/wav"
    picks = {"voice": "voices", "language": "languages"}
    heard_by = "listen"
    keeps = "voice takes"

    def check_prompt(self, what: str, prompt: str) -> None:
        pass  # any length: the text is split to fit the server's messages

    def hearing(self, data: dict[str, Any]) -> dict[str, Any] | None:
        from services.eval.listening import intelligibility_setting
        return intelligibility_setting(data.get("intelligibility"))

    def request(self, prompt: str, settings: dict[str, Any]) -> Any:
        from services.speech import speech_config
        return speech_config(voice=settings.get("voice"), language=settings.get("language"),
                             split_granularity=settings.get("split", "clause"), task_type=settings.get("task_type"),
                             instructions=settings.get("instructions"),
                             initial_codec_chunk_frames=settings.get("first_chunk_frames"))

    def generate(self, backend: Any, prompt: str, settings: dict[str, Any], **_: Any) -> tuple[bytes, dict[str, Any]]:
        import asyncio

        from protocol.errors import StudioError
        started = time.perf_counter()
        utterance = asyncio.run(backend.client(self.name).say(self.request(prompt, settings), prompt))
        if not utterance.ok:
            raise StudioError(str(utterance.error))
        st = utterance.stats
        figures = {"latency_s": time.perf_counter() - started, "ttfa_ms": st.ttfa_ms, "rtf": st.rtf,
                   "audio_seconds": st.audio_seconds}
        return utterance.wav(), figures

    def offer(self, backend: Any) -> tuple[list[str], ...]:
        client = backend.client(self.name)
        return list(client.voices()), list(client.languages())

    def hear(self, backend: Any, data: bytes, prompt: str, setting: dict[str, Any]) -> dict[str, Any]:
        from services.eval.listening import hear_take
        return hear_take(backend.client(self.heard_by), data, prompt, setting.get("model"))

    # -- the Voice page's takes -----------------------------------------------------------------------------------
    def kept_choices(self, history: Any, *, limit: int = 50) -> list[KeptChoice]:
        return [KeptChoice(t.id, f"{t.text[:70]} · {t.voice_label or 'default voice'}")
                for t in history.takes.list(limit=limit) if t.ok]

    def kept(self, history: Any, record_id: str) -> Kept:
        from protocol.errors import InvalidInput
        take = history.takes.get(record_id)
        if not take.ok:
            raise InvalidInput(f"take {record_id} {take.state} before it ended: pick a finished take")
        figures = {k: take.figures[k] for k in ("ttfa_ms", "rtf", "audio_seconds") if take.figures.get(k) is not None}
        settings = {k: v for k, v in {"voice_label": take.voice_label, "target": take.target}.items() if v}
        return Kept(take.id, take.text, take.wav(), figures, settings)

    # -- the report -----------------------------------------------------------------------------------------------
    def timing(self, ok: list[Item]) -> dict[str, Any]:
        ttfa = stats.summary(i.figures.get("ttfa_ms") for i in ok)
        return {"ttfa_p50_ms": ttfa["p50"], "ttfa_p95_ms": ttfa["p95"], "ttfa_n": ttfa["n"]}

    def measured(self, spec: EvalSpec, ok: list[Item]) -> dict[str, Any]:
        if not spec.intelligibility:
            return {}
        return wer_figures("intelligibility_", [(i.figures["intel_errors"], i.figures["intel_words"])
                                                for i in ok if "intel_words" in i.figures])

    def columns(self, res: dict[str, Any]) -> tuple[str, ...]:
        return super().columns(res) + (INTELLIGIBILITY_COLUMNS if res.get("intelligibility_target") else ())

    def measured_lines(self, res: dict[str, Any]) -> list[str]:
        if not res.get("intelligibility_target"):
            return []
        lines = [f"{v['label']}: intelligibility WER {wer_text(v['intelligibility_wer'], v['intelligibility_ci95'],
                                                               v['intelligibility_n'], v['intelligibility_words'])}"
                 for v in res["variants"]]
        return [*lines, f"Heard by {res['intelligibility_target']}.", f"Method: {res['method']['wer']}."]

    def summary(self, v: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
        cells = rated.summary(v) | {"first audio p50 (ms)": _round(v.get("ttfa_p50_ms"), 0)}
        if res.get("intelligibility_target"):
            wer = v.get("intelligibility_wer")
            cells["intelligibility WER"] = None if wer is None else (
                f"{wer:.1%} [{rated.interval(v['intelligibility_ci95'], '{:.1%}') or '—'}]")
        return cells


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


EVALUATION = VoiceEval()
