"""Turn detection for the duplex session (offline/listen/duplex.py): the Silero VAD's window probabilities
(offline/listen/vad.py, 32 ms windows) → speech started / speech stopped, with the session's `turn_detection`.

Speech starts when windows at or above `threshold` have run unbroken for at least MIN_SPEECH_MS (a cough or a
click shorter than that is no turn and interrupts nothing); its start is the first of those windows. It stops
after `silence_duration_ms` of windows below the threshold (`server_vad`), or, with `semantic_vad`, when the
end-of-turn rule the studio's pipeline conversations use (hearing/turn_end.py: the Smart Turn model scores the turn
at each pause, from 200 ms of silence, up to 1.5 s) says it is over; its end is the end of the last window at or
above the threshold either way. Times are milliseconds on the session's input clock (audio appended so far).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from hearing.turn_end import EndOfTurn
from hearing.turn_end import TurnDetection as EndOfTurnRule
from hearing.vad import WINDOW_S
from protocol.duplex import EOT_THRESHOLD, MIN_SPEECH_MS, TurnDetection

WINDOW_MS = WINDOW_S * 1000


@dataclass
class TurnDetector:
    settings: TurnDetection = field(default_factory=TurnDetection)
    windows: int = 0  # windows scored so far
    speaking: bool = False
    _run: int = 0  # unbroken voiced windows before speech has started
    _quiet: int = 0
    _last_voiced: int = 0
    end_of_turn: EndOfTurn | None = None  # semantic_vad: the learned rule (made when the settings ask for it)

    def configure(self, settings: TurnDetection) -> None:
        """The session's `turn_detection` (each session.update)."""
        self.settings = settings
        self.end_of_turn = None
        if settings.type == "semantic_vad":
            self.end_of_turn = EndOfTurn(EndOfTurnRule(
                "learned", silence_ms=min(5000, max(100, settings.silence_duration_ms)),
                threshold=EOT_THRESHOLD if settings.eot_threshold is None else settings.eot_threshold))

    def cut(self) -> int:
        """End the turn being spoken here (it reached its longest, offline.listen.limits.TURN_MAX_S): its end ms.
        Speech that goes on starts a new turn once it has run MIN_SPEECH_MS."""
        self.speaking, self._run, self._quiet = False, 0, 0
        return round(self.windows * WINDOW_MS)

    def feed(self, probs, turn_pcm: Callable[[int], bytes] | None = None  # type: ignore[no-untyped-def]
             ) -> list[tuple[str, int]]:
        """("started", audio_start_ms) and ("stopped", audio_end_ms) for the windows `probs` completes.
        `turn_pcm(end_ms)`: the turn's audio up to end_ms, for the learned rule to score (semantic_vad)."""
        need = max(1, math.ceil(MIN_SPEECH_MS / WINDOW_MS))
        quiet_max = max(1, math.ceil(self.settings.silence_duration_ms / WINDOW_MS))
        events: list[tuple[str, int]] = []
        for p in probs:
            i = self.windows
            self.windows += 1
            voiced = float(p) >= self.settings.threshold
            if not self.speaking:
                self._run = self._run + 1 if voiced else 0
                if self._run >= need:
                    self.speaking, self._quiet, self._last_voiced = True, 0, i
                    events.append(("started", round((i - self._run + 1) * WINDOW_MS)))
                continue
            if voiced:
                self._quiet, self._last_voiced = 0, i
                if self.end_of_turn is not None:
                    self.end_of_turn.speech()
                continue
            self._quiet += 1
            end_ms = round((self._last_voiced + 1) * WINDOW_MS)
            if self.end_of_turn is not None and turn_pcm is not None:
                if self.end_of_turn.pause(self._quiet * WINDOW_MS, lambda e=end_ms: turn_pcm(e)) is None:
                    continue
            elif self._quiet < quiet_max:
                continue
            self.speaking, self._run = False, 0
            events.append(("stopped", end_ms))
        return events
