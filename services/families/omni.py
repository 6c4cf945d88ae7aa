"""Omni (Qwen3-Omni): one model that hears and speaks. Its duplex session is opened per conversation by
services/converse (native mode), not held by a backend, so it registers no client here."""

from __future__ import annotations

from services.families.parts import FamilyCode

FAMILY = FamilyCode(name="omni")
