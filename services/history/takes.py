"""The Voice page's speech takes in the history: the text, what spoke, the config sent, the figures, and the WAV
in media/<take id>/take.wav — also of a take that failed or was stopped (the audio that arrived is kept).

    take = history.takes.record(text, wav, target=url, voice_label="voice joe", figures=stats.figures())
    history.takes.list(limit=10), history.takes.get(take.id).wav()
"""

from __future__ import annotations

import io
import json
import time
import uuid
import wave
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from protocol.errors import InvalidInput
from services.access import LOCAL, require
from services.history.base import read_kept

if TYPE_CHECKING:
    from services.media_store import MediaStore
    from services.history.db import Row
    from services.history.host import Host

TAKE_FILE = "take.wav"  # a speech take's audio, in media/<take id>/
TakeState = Literal["done", "failed", "cancelled"]


@dataclass(frozen=True)
class SpeechTake:
    """One take of the Voice page: what was said, by which voice, where, its figures and its WAV (`wav()`)."""

    id: str
    text: str
    voice_label: str | None
    config: dict[str, Any]
    target: str
    figures: dict[str, Any]
    state: TakeState
    error: str | None
    audio: str
    created_at: float
    media: MediaStore = field(repr=False, compare=False)
    user_id: str = LOCAL.id
    shared: bool = False

    @property
    def ok(self) -> bool:
        return self.state == "done" and self.error is None

    def wav(self) -> bytes:
        """The WAV bytes; HistoryError when they are gone (the server's log says where they were)."""
        return read_kept(self.media, self.id, self.audio, f"take {self.id}") or b""


def _take(row: Row, media: MediaStore) -> SpeechTake:
    return SpeechTake(id=row["id"], text=row["text"], voice_label=row["voice_label"], config=json.loads(row["config"]),
                      target=row["target"], figures=json.loads(row["figures"]), state=row["state"], error=row["error"],
                      audio=row["audio"], created_at=row["created_at"], media=media,
                      user_id=row["user_id"], shared=bool(row["shared"]))


def _wav_frames(wav: bytes) -> int:
    """The audio frames in `wav`; InvalidInput when it is not a WAV."""
    try:
        with wave.open(io.BytesIO(wav)) as w:
            return w.getnframes()
    except (wave.Error, EOFError) as exc:
        raise InvalidInput(f"a speech take's audio must be a WAV file ({exc})") from None


class TakeStore:
    """The speech takes in `history`, acting for its actor (over its one connection and write path)."""

    def __init__(self, history: Host) -> None:
        self.history = history

    def record(self, text: str, wav: bytes, *, target: str, state: TakeState = "done", error: str | None = None,
               voice_label: str | None = None, config: Mapping[str, Any] | None = None,
               figures: Mapping[str, Any] | None = None, created_at: float | None = None) -> SpeechTake:
        """Keep a finished take, the actor's (Forbidden unless their role may generate): its WAV in
        media/<id>/take.wav (written, atomically, before the row), the text, what spoke, the config sent (keep a
        reference recording out of it), the figures. A take that failed or was stopped keeps the audio that
        arrived (`state`, `error`); one with no audio at all is refused (InvalidInput): nothing to keep."""
        history = self.history
        require(history.actor, "generate")
        if _wav_frames(wav) == 0:
            raise InvalidInput("this take has no audio: nothing arrived before it ended, so it is not kept")
        take_id = f"take-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        with history.new_record(take_id, "speech take", {TAKE_FILE: wav}) as ([name], db):
            db.execute(
                "INSERT INTO speech_takes (id, text, voice_label, config, target, figures, state, error, audio,"
                " created_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (take_id, text, voice_label, json.dumps(dict(config or {})), target,
                 json.dumps(dict(figures or {})), state, error, name, float(created_at or time.time()),
                 history.actor.id))
        return self.get(take_id)

    def list(self, *, limit: int | None = 50) -> list[SpeechTake]:
        """The actor's speech takes and those others shared, newest first."""
        return [_take(r, self.history.media) for r in self.history.visible_rows("speech_takes", limit)]

    def get(self, take_id: str) -> SpeechTake:
        """The take; someone else's unshared take is refused like a missing one."""
        return _take(self.history.visible_row("speech_takes", take_id, "take"), self.history.media)
