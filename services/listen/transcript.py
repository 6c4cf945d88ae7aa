"""What listening gives back: the text, its segments and the figures, and the files it can be written as."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from protocol.listen import TranscriptionSegment, srt, vtt

Route = Literal["file", "stream"]
OUT_SUFFIXES = (".txt", ".srt", ".vtt", ".json")


@dataclass(frozen=True)
class Segment:
    """A stretch of the audio and its text; start and end in seconds."""

    start: float
    end: float
    text: str

    def as_json(self) -> dict[str, Any]:
        """As the JSON, the figures and the history keep it: {"start", "end", "text"}."""
        return {"start": self.start, "end": self.end, "text": self.text}

    @classmethod
    def of(cls, kept: dict[str, Any]) -> Segment:
        """A segment as `as_json` wrote it."""
        return cls(kept["start"], kept["end"], kept["text"])


@dataclass
class Transcript:
    """One recording transcribed: the text, its segments (may be empty: not every server times its text) and
    the figures. `elapsed_s` runs from the first byte of audio sent to the answer; with a stream,
    `first_partial_ms` runs from the first audio sent to the first delta and `final_ms` from the last audio sent
    to `transcription.done`."""

    text: str
    route: Route
    audio_s: float
    elapsed_s: float
    model: str
    target: str
    segments: list[Segment] = field(default_factory=list)
    preview: str | None = None  # the target's own note when its answers are a stand-in (the offline engine)
    served_by: str | None = None  # what answered for `model` when it is a stand-in ("Whisper tiny.en (…)")
    first_partial_ms: float | None = None
    final_ms: float | None = None
    partials: int = 0
    fitting: str | None = None  # how the recording was made to fit the target (cut into pieces), when it was

    @property
    def rtf(self) -> float | None:
        """Real-time factor: time taken per second of audio (a paced stream cannot go below about 1)."""
        return self.elapsed_s / self.audio_s if self.audio_s > 0 else None

    def figures(self, *, backend: str, wer: float | None) -> dict[str, Any]:
        """The object `python -m services listen --json` prints (and writes as .json)."""
        out: dict[str, Any] = {
            "text": self.text,
            "segments": [s.as_json() for s in self.segments],
            "audio_s": round(self.audio_s, 3),
            "rtf": None if self.rtf is None else round(self.rtf, 4),
            "model": self.model,
            **({"served_by": self.served_by} if self.served_by else {}),
            "backend": backend,
            "target": self.target,
        }
        if self.route == "stream":
            out["first_partial_ms"] = None if self.first_partial_ms is None else round(self.first_partial_ms, 1)
            out["final_ms"] = None if self.final_ms is None else round(self.final_ms, 1)
            out["partials"] = self.partials
        out["wer"] = None if wer is None else round(wer, 4)
        if self.fitting:
            out["fitting"] = self.fitting
        return out

    def cues(self) -> list[TranscriptionSegment]:
        """The segments as subtitle cues; without segments the whole text is one cue over the whole audio."""
        spans = self.segments or [Segment(0.0, self.audio_s, self.text)]
        return [TranscriptionSegment(id=i, start=s.start, end=s.end, text=s.text) for i, s in enumerate(spans)]

    def render(self, suffix: str, figures: dict[str, Any]) -> bytes:
        """The transcript as a file of the kind `suffix` names (.txt, .srt, .vtt or .json: the figures)."""
        if suffix == ".srt":
            return srt(self.cues()).encode("utf-8")
        if suffix == ".vtt":
            return vtt(self.cues()).encode("utf-8")
        if suffix == ".json":
            return (json.dumps(figures, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        return (self.text + "\n").encode("utf-8")
