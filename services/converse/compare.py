"""Compare two setups (services/converse/setup.py) on the same recorded turns.

    a = Setup(listen=url, speak=url)                       # pipeline, the default script, silence window 500 ms
    b = a.changed(silence_ms=700)                          # B: A with what differs
    result = await compare(inputs, a, b)                   # A's whole conversation, then B's: never both at once
    result.as_json()   # {"a": {...}, "b": {...}, "ratio_p50": B's voice-to-voice p50 / A's}
    result.rows()      # the side-by-side table (the page's, the CLI's text)

The two setups run one after the other on this machine, so one does not slow the other. Each side's figures:
voice-to-voice {n, p50, p95} exactly as `Conversation.voice_to_voice()` gives it, and per stage the median
(nearest-rank p50, services/stats.py, with its n) of the transcript's final, the reply's first token and the
agent's first audio, each in ms from where the person's speech ended, over the turns that reached that stage (the
first audio's median is the voice-to-voice p50 by definition). `ratio_p50` is B's voice-to-voice p50 over A's
(None when either has none); each row of the table has its own B/A the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.errors import InvalidInput
from services.converse.setup import Setup
from services.converse.timeline import Conversation
from services.listen import ListenAudio
from services.stats import percentile

# The stages a turn's timeline passes, after the person's speech ended: (the figure's key, its words, the turn's field)
STAGES = (("transcript_final", "final transcript", "transcript_final_s"),
          ("first_token", "first reply token", "reply_first_token_s"),
          ("first_audio", "first audio received", "first_audio_s"))


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def stage_medians(conv: Conversation) -> dict[str, dict[str, Any]]:
    """Per stage {n, p50}: ms from the person's speech end, over the turns that reached it (nearest-rank)."""
    out = {}
    for key, _, field in STAGES:
        values = [(getattr(t, field) - t.user_speech_end_s) * 1000 for t in conv.turns
                  if getattr(t, field) is not None and t.user_speech_end_s is not None]
        out[key] = {"n": len(values), "p50": _r(percentile(values, 50))}
    return out


def ratio(b: float | None, a: float | None) -> float | None:
    """B over A, 3 decimals; None when either is missing or A is zero."""
    return None if a is None or b is None or a == 0 else round(b / a, 3)


@dataclass(frozen=True)
class Comparison:
    """Both setups, the inputs they heard (by name) and the conversation each held."""

    a: Setup
    b: Setup
    inputs: tuple[str, ...]
    conv_a: Conversation
    conv_b: Conversation

    @staticmethod
    def side(setup: Setup, conv: Conversation, inputs: tuple[str, ...]) -> dict[str, Any]:
        return {"setup": setup.settings(), "inputs": list(inputs), "voice_to_voice_ms": conv.voice_to_voice(),
                "stages_ms": stage_medians(conv), "failed_turns": sum(1 for t in conv.turns if t.error),
                "conversation": conv.as_json()}

    @property
    def ratio_p50(self) -> float | None:
        return ratio(self.conv_b.voice_to_voice()["p50"], self.conv_a.voice_to_voice()["p50"])

    def as_json(self) -> dict[str, Any]:
        return {"a": self.side(self.a, self.conv_a, self.inputs), "b": self.side(self.b, self.conv_b, self.inputs),
                "ratio_p50": self.ratio_p50}

    def rows(self) -> list[dict[str, Any]]:
        """The side-by-side table: one row per figure (ms), A's and B's values with their n, and B/A."""
        va, vb = self.conv_a.voice_to_voice(), self.conv_b.voice_to_voice()
        sa, sb = stage_medians(self.conv_a), stage_medians(self.conv_b)
        figures = [("voice-to-voice p50", va["p50"], va["n"], vb["p50"], vb["n"]),
                   ("voice-to-voice p95", va["p95"], va["n"], vb["p95"], vb["n"])]
        figures += [(f"{words}, median from speech end", sa[key]["p50"], sa[key]["n"], sb[key]["p50"], sb[key]["n"])
                    for key, words, _ in STAGES]
        return [{"figure": name, "A (ms)": a, "n A": na, "B (ms)": b, "n B": nb, "B/A": ratio(b, a)}
                for name, a, na, b, nb in figures]


async def compare(inputs: list[ListenAudio], a: Setup, b: Setup) -> Comparison:
    """The same inputs through A, then through B (both checked, and their runners built, before either runs)."""
    if not inputs:
        raise InvalidInput("give at least one recorded turn: both setups hear the same ones")
    runners = (a.check().runner(), b.check().runner())
    first = await runners[0].run(list(inputs))
    second = await runners[1].run(list(inputs))
    return Comparison(a, b, tuple(x.name for x in inputs), first, second)


def _setup_line(s: dict[str, Any]) -> str:
    where = f"at {s['url']}" if s["mode"] == "native" else f"listen {s['listen']}, speak {s['speak']}"
    turns = f"silence window {s['silence_ms']} ms"
    if s["mode"] == "pipeline" and s.get("turn_detector") == "learned":
        turns = f"learned end of turn (threshold {s.get('eot_threshold', 0.5):g}; fallback {turns})"
    return (f"{s['mode']} ({where}), {turns}, reply from {s['reply']}, "
            f"voice {s['voice'] or 'the server default'}")


def _cell(x: Any) -> str:
    return "—" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def render(result: Comparison) -> str:
    """Both conversations turn by turn, then the side-by-side table, for a terminal."""
    lines = []
    for side, setup, conv in (("A", result.a, result.conv_a), ("B", result.b, result.conv_b)):
        lines.append(f"setup {side}: {_setup_line(setup.settings())}")
        for i, turn in enumerate(conv.turns, start=1):
            v2v = "—" if turn.voice_to_voice_ms is None else f"{turn.voice_to_voice_ms:.0f} ms"
            said = f"error: {turn.error}" if turn.error else repr(turn.reply_text.strip())
            lines.append(f"  turn {i}: you: {turn.user_text!r} → agent: {said} (voice-to-voice {v2v})")
    rows = result.rows()
    cols = list(rows[0])
    cells = [[_cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    lines.append(f"B/A of voice-to-voice p50: {_cell(result.ratio_p50)} (nearest-rank percentiles; n = turns that "
                 "have the figure; stages in ms from the person's speech end)")
    return "\n".join(lines)


def failure(result: Comparison) -> str | None:
    """Why a side answered no turn because a target failed (its first error), else None."""
    for side, conv in (("A", result.conv_a), ("B", result.conv_b)):
        errors = [t.error for t in conv.turns if t.error]
        if conv.turns and errors and not any(t.error is None and t.first_audio_s is not None for t in conv.turns):
            return f"setup {side} answered no turn: {errors[0]}"
    return None
