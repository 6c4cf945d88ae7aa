"""A recorded input taken as a microphone would send it, through the same end-of-turn rule as a live one
(hearing/turn_end.py): `split_turns` cuts it where the rule ends a turn, so a cut-off mid-input shows as
more turns than inputs (services/converse/pipeline.py holds each part as its own turn).
"""

from __future__ import annotations

from dataclasses import dataclass

from hearing.turn_end import Decision, TurnDetection
from protocol.listen import LISTEN_SAMPLE_RATE
from services.converse.bargein import SpeechStart, TurnTaking


@dataclass(frozen=True)
class Part:
    """A recorded input's piece that is one turn: its audio up to the moment its end was decided (the speech, then
    the `decision.wait_ms` of silence the rule waited: the input's own, or zeros past its end), and that decision."""

    pcm: bytes
    decision: Decision
    index: int  # 0 for the input's first turn; 1, 2, … for the turns a cut-off made of the rest


def split_turns(pcm: bytes, detection: TurnDetection, *, vad_threshold: float, min_speech_ms: int) -> list[Part]:
    """A recorded input taken as a microphone would send it, through the same detector as a live one: where the rule
    ends a turn inside the input, the input is cut there, and the rest (from the moment the turn was decided)
    becomes the next turn. An input in which no speech starts is one part, ended by the silence window, as it
    always was. Scores are waited for here, and each one's own time is added to its wait, as it would be live."""
    frame = int(FRAME_BYTES)
    tail = bytes(int(detection.cap_ms / 1000 * LISTEN_SAMPLE_RATE) * 2 // frame * frame + frame)
    parts: list[Part] = []
    rest = pcm
    while rest:
        taker = TurnTaking(vad_threshold, min_speech_ms, detection=detection, blocking=True)
        fed = memoryview(rest + tail)  # once per part: slices of it, not a copy of the whole per frame
        end = None
        for at in range(0, len(fed), frame):
            for kind, where in taker.feed(bytes(fed[at:at + frame])):
                if kind == "end":
                    end = where
            if end is not None:
                break
        if end is None:  # no speech starts in it: one turn, the silence window's
            if not parts:  # the recording, then the window's silence
                window = int(detection.silence_ms / 1000 * LISTEN_SAMPLE_RATE) * 2
                parts.append(Part(rest + bytes(window), Decision("silence", float(detection.silence_ms)), 0))
            break
        decision = taker.decisions[-1]
        # live, the turn is decided when the score that ended it comes back: its own time is part of the wait
        wait_ms = decision.wait_ms + (taker.ender.last_score_ms if decision.rule == "learned" else 0.0)
        decision = Decision(decision.rule, wait_ms, decision.probability)
        decided_at = int(end * LISTEN_SAMPLE_RATE) * 2 + int(wait_ms / 1000 * LISTEN_SAMPLE_RATE) * 2
        heard = rest[:decided_at]  # the speech and the silence the rule waited (zeros past the input's end)
        parts.append(Part(heard + bytes(decided_at - len(heard)), decision, len(parts)))
        rest = rest[decided_at:]
        if not _speech_in(rest, vad_threshold, min_speech_ms):
            break
    return parts


FRAME_BYTES = 0.02 * LISTEN_SAMPLE_RATE * 2


def _speech_in(pcm: bytes, vad_threshold: float, min_speech_ms: int) -> bool:
    return SpeechStart(vad_threshold, min_speech_ms).feed(pcm) is not None
