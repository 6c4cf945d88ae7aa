"""What a variant's settings make: the request each item sends, checked (shared by the SPEC check and the runner).
Each family's part builds its own (services/eval/family.py: `EvalFamily.request`)."""

from __future__ import annotations

from typing import Any

from services.eval.registry import evaluation


def build_request(modality: str, prompt: str, settings: dict[str, Any]) -> Any:
    """The request (voice: the session config) a variant's settings make, checked: InvalidInput names the
    setting to fix. The SPEC check calls it with a sample prompt ("check"), so bad values fail before any run."""
    return evaluation(modality).request(prompt, settings)
