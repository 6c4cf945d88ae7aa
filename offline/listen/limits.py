"""How much of the listen engine one client may hold, and for how long (docs/listen.md, "Limits").

The engine has a few decoders (each ~90 MB of pocketsphinx model) and every client of it is anonymous, so each
hold on it is bounded:

- a file request or a stream waits at most LEASE_WAIT_S for a decoder, then is told the engine is busy;
- a session (`/v1/realtime`, with or without `?duplex=1`) with no event from its client for IDLE_S (and nothing
  left to decode or to say) is closed, and none stays open longer than SESSION_MAX_S;
- at most DUPLEX_SESSIONS_MAX duplex sessions are open at once (each keeps its own VAD, ~11 MB);
- a duplex turn is ended at TURN_MAX_S (its audio is kept until it is heard);
- the file route decodes at most FILE_MAX_S of audio per file.

Each is a setting of the engine (`OMNI_ENGINE_LISTEN_…`, read once by `ListenLimits.from_env`), so tests can run an
engine with small ones; the constants are the product's defaults. Every refusal names the limit and its setting.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from offline.guards import count_setting, seconds_setting

LEASE_WAIT_S = 10.0  # a file or a stream waits this long for a decoder: a file of a few minutes is decoded in less
IDLE_S = 60.0  # a session whose client sent nothing for a minute (and has nothing being decoded) is abandoned
SESSION_MAX_S = 7200.0  # two hours: the studio's longest recording (an hour) streamed at real time, with room
DUPLEX_SESSIONS_MAX = 16  # 16 × ~11 MB of VAD state: what the engine keeps for open duplex sessions at most
TURN_MAX_S = 30.0  # a duplex turn longer than this is ended there, as a VAD-less server would (~1 MB of audio)
FILE_MAX_S = 1800.0  # 30 minutes: ~115 MB of 16 kHz float32 samples while a file is decoded and scored
# A session handling messages back to back (a flood of tiny appends already queued) lets the event loop run other
# clients at least this often: ~5 loop turns of overhead per second at most, and /health is never starved.
YIELD_EVERY_S = 0.005

LEASE_WAIT_ENV = "OMNI_ENGINE_LISTEN_WAIT_S"
IDLE_ENV = "OMNI_ENGINE_LISTEN_IDLE_S"
SESSION_MAX_ENV = "OMNI_ENGINE_LISTEN_SESSION_MAX_S"
DUPLEX_SESSIONS_ENV = "OMNI_ENGINE_LISTEN_DUPLEX_SESSIONS"
TURN_MAX_ENV = "OMNI_ENGINE_LISTEN_TURN_MAX_S"
FILE_MAX_ENV = "OMNI_ENGINE_LISTEN_FILE_MAX_S"

BUSY_CODE = "server_busy"
IDLE_CODE = "session_idle"
EXPIRED_CODE = "session_expired"
TURN_LIMIT_CODE = "turn_too_long"


def _seconds(n: float) -> str:
    return f"{n:g} s"


@dataclass(frozen=True)
class ListenLimits:
    """The engine's bounds on what one client holds (see the module's doc)."""

    lease_wait_s: float = LEASE_WAIT_S
    idle_s: float = IDLE_S
    session_max_s: float = SESSION_MAX_S
    duplex_sessions: int = DUPLEX_SESSIONS_MAX
    turn_max_s: float = TURN_MAX_S
    file_max_s: float = FILE_MAX_S

    @classmethod
    def from_env(cls) -> ListenLimits:
        return cls(lease_wait_s=seconds_setting(LEASE_WAIT_ENV, LEASE_WAIT_S),
                   idle_s=seconds_setting(IDLE_ENV, IDLE_S),
                   session_max_s=seconds_setting(SESSION_MAX_ENV, SESSION_MAX_S),
                   duplex_sessions=count_setting(DUPLEX_SESSIONS_ENV, DUPLEX_SESSIONS_MAX),
                   turn_max_s=seconds_setting(TURN_MAX_ENV, TURN_MAX_S),
                   file_max_s=seconds_setting(FILE_MAX_ENV, FILE_MAX_S))

    def busy_text(self, decoders: int) -> str:
        return (f"the offline engine is busy: all {decoders} decoders are in use and none came free within "
                f"{_seconds(self.lease_wait_s)} ({LEASE_WAIT_ENV}); try again shortly")

    def duplex_busy_text(self) -> str:
        return (f"the offline engine is busy: {self.duplex_sessions} duplex sessions are open, its most at once "
                f"({DUPLEX_SESSIONS_ENV}); try again when one has closed")

    def idle_text(self) -> str:
        return (f"no event from the client for {_seconds(self.idle_s)}: the offline engine closes idle sessions "
                f"({IDLE_ENV}); open a new session to go on")

    def expired_text(self) -> str:
        return (f"the session reached its maximum length of {_seconds(self.session_max_s)} and is closed "
                f"({SESSION_MAX_ENV}); open a new session to go on")

    def turn_text(self) -> str:
        return (f"the turn reached the {_seconds(self.turn_max_s)} limit and was ended there ({TURN_MAX_ENV}): "
                "what was heard so far is answered, and speech that goes on starts a new turn")

    def file_text(self, duration_s: float | None) -> str:
        length = f"{duration_s:.1f} s long" if duration_s is not None else f"longer than {_seconds(self.file_max_s)}"
        return (f"The audio is {length}; the offline engine transcribes at most {_seconds(self.file_max_s)} "
                f"({self.file_max_s / 60:g} min) per file ({FILE_MAX_ENV}). Split the recording into shorter files.")


class SessionClock:
    """A session's two limits: `receive` waits for the client's next message, or says which limit came first;
    `share` lets other clients in after a message when this session has kept the event loop long enough."""

    def __init__(self, limits: ListenLimits) -> None:
        self.limits = limits
        self.opened = time.monotonic()
        self.last_event = self.opened
        self._yielded = self.opened

    async def share(self) -> None:
        """Yield the event loop once if YIELD_EVERY_S has passed since this session last did: messages already
        received are handled without a pause otherwise, and a flood of them would keep every other client out."""
        now = time.monotonic()
        if now - self._yielded >= YIELD_EVERY_S:
            self._yielded = now
            await asyncio.sleep(0)

    async def receive(self, ws: Any, busy: Any) -> dict[str, Any] | str:
        """The next ASGI message of `ws`, or IDLE_CODE / EXPIRED_CODE. `busy()` true (audio being decoded, a
        reply being spoken) keeps an idle session open: it is the engine's turn, not the client's."""
        while True:
            now = time.monotonic()
            left = self.opened + self.limits.session_max_s - now
            if left <= 0:
                return EXPIRED_CODE
            idle_left = self.last_event + self.limits.idle_s - now
            if idle_left <= 0:
                if not busy():
                    return IDLE_CODE
                self.last_event, idle_left = now, self.limits.idle_s
            try:
                message = await asyncio.wait_for(ws.receive(), min(left, idle_left))
            except TimeoutError:
                continue
            self.last_event = time.monotonic()
            return message
