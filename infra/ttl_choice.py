"""What `--ttl` asks for, and how the studio writes the times a TTL is about.

    choice = parse_ttl("8h", now=now)               # TtlChoice; UsageError names what to fix
    iso(choice.expires_at), format_left(seconds)    # "2026-05-01T18:00:00Z", "2 h 10 min"

Pure: no AWS, no state file. infra/ttl.py turns a choice into EventBridge Scheduler schedules.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from infra.errors import UsageError

MAX_TTL_WITHOUT_YES = timedelta(days=7)
MAX_TTL = timedelta(days=365)  # even with --yes: past a year it is a typo, not a plan (and dates overflow)

_UNITS = {"d": 86400, "day": 86400, "days": 86400, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60, "s": 1, "sec": 1, "secs": 1, "second": 1,
          "seconds": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_DURATION = re.compile(r"^(\s*\d+(?:\.\d+)?\s*[a-z]+)+\s*$")


@dataclass(frozen=True)
class TtlChoice:
    """What --ttl asked for: an end time (UTC), or none (--no-ttl)."""

    expires_at: datetime | None
    given: str | None = None

    @property
    def enabled(self) -> bool:
        return self.expires_at is not None

    def describe(self, now: datetime | None = None) -> str:
        if self.expires_at is None:
            return "no TTL"
        now = now or datetime.now(UTC)
        return f"{iso(self.expires_at)} (in {format_left((self.expires_at - now).total_seconds())})"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def format_left(seconds: float | None) -> str:
    """`2 h 10 min`, `45 min`, `3 d 4 h`, `under a minute`; `—` for None."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return "under a minute"
    minutes = int(seconds // 60)
    days, rem = divmod(minutes, 24 * 60)
    hours, mins = divmod(rem, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {mins} min" if mins else f"{hours} h"
    return f"{mins} min"


def parse_ttl(value: str | None, *, now: datetime | None = None, yes: bool = False, option: str = "--ttl") -> TtlChoice:
    """`8h`, `90m`, `1h30m`, `2d` (from now) or an ISO time (`2026-05-01T18:00Z`; without a zone: this machine's
    local time). None is no TTL. UsageError for what cannot be read, zero, a time in the past, more than
    7 days without `yes` (a forgotten GPU endpoint bills for all of it), or more than MAX_TTL."""
    if value is None:
        return TtlChoice(None)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    text = value.strip().lower()
    examples = "e.g. 8h, 90m, 1h30m, 2d, or a time such as 2026-05-01T18:00Z"

    def too_long() -> UsageError:
        shown = str(value) if len(str(value)) <= 40 else str(value)[:30] + "…"
        return UsageError(f"{option} {shown!r} is too long: a time to live is from 1 second to {MAX_TTL.days} days "
                          f"(over {MAX_TTL_WITHOUT_YES.days} days with --yes), {examples}; --no-ttl keeps the endpoints "
                          "until `python -m infra delete`")

    if not text:
        raise UsageError(f"{option} is empty: give a time to live, {examples} (or --no-ttl to keep the endpoints)")
    if _DURATION.match(text):
        seconds = 0.0
        for number, unit in _PART.findall(text):
            if unit not in _UNITS:
                raise UsageError(f"{option} {value!r}: unknown unit {unit!r}; use d, h, m or s ({examples})")
            seconds += float(number) * _UNITS[unit]
        if not seconds <= MAX_TTL.total_seconds():  # also inf, from a number too long for a float
            raise too_long()
        if seconds <= 0:
            raise UsageError(f"{option} {value!r} is zero: the endpoints would be deleted as they are created. Give a "
                             f"time to live ({examples}), or run `python -m infra delete` to remove them now")
        expires = now + timedelta(seconds=math.ceil(seconds))
    elif re.fullmatch(r"\s*\d+(\.\d+)?\s*", text):
        raise UsageError(f"{option} {value!r} has no unit: write {value.strip()}h for hours or {value.strip()}m for "
                         "minutes")
    else:
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise UsageError(f"{option} {value!r} is neither a duration nor a time: {examples} (or --no-ttl to keep "
                             "the endpoints until you delete them)") from None
        try:
            expires = (moment if moment.tzinfo else moment.astimezone()).astimezone(UTC)
        except (OverflowError, ValueError):  # year 9999 in a zone west of UTC is past datetime's range
            raise too_long() from None
        if expires - now > MAX_TTL:
            raise too_long()
        if expires <= now:
            raise UsageError(f"{option} {value!r} is in the past ({iso(expires)}, {format_left((now - expires).total_seconds())} "
                             f"ago; now is {iso(now)}): give a later time or a duration such as 8h")
    expires = expires.replace(microsecond=0) + (timedelta(seconds=1) if expires.microsecond else timedelta())
    if expires - now > MAX_TTL_WITHOUT_YES and not yes:
        raise UsageError(f"{option} {value!r} keeps the endpoints for {format_left((expires - now).total_seconds())} "
                         f"(until {iso(expires)}); a TTL over {MAX_TTL_WITHOUT_YES.days} days asks for confirmation — "
                         "pass --yes as well, or a shorter --ttl (`python -m infra extend` can move it later)")
    return TtlChoice(expires, value)
