"""The emulator's clock for what happens on its own in an account: schedules firing, endpoints scaling.

Real time plus an offset that only moves forward; the tests move it (POST /_emulator/clock) instead of
sleeping. Everything else in the emulator (creation times, delays) runs on real time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


class Clock:
    def __init__(self) -> None:
        self.offset_s = 0.0

    def now(self) -> float:
        return time.time() + self.offset_s

    def iso(self) -> str:
        return datetime.fromtimestamp(self.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
