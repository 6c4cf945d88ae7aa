"""Omni (Qwen3-Omni): one model that hears and speaks. Its duplex session is opened per conversation by
services/converse (native mode), not held by a backend, so it registers no client here."""

from __future__ import annotations

from typing import Any

from services.families.parts import FamilyCode


def _smoke(backend: Any, ctx: Any) -> Any:
    from services.smoke.omni import smoke_omni

    return smoke_omni(backend, ctx)


FAMILY = FamilyCode(name="omni", smoke=_smoke)
