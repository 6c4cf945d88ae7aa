"""The families that can be evaluated — those whose module in services/families registers an `evaluation` part
(services/eval/family.py) — and the part of each, found by name when asked (so the registry is the one list)."""

from __future__ import annotations

from typing import Literal

from protocol.catalog import FAMILY_NAMES
from protocol.errors import InvalidInput
from services import families
from services.eval.family import EvalFamily

MODALITIES: tuple[str, ...] = families.having("evaluation")
Modality = Literal[MODALITIES]  # type: ignore[valid-type]


def modalities() -> tuple[str, ...]:
    """The families with an evaluation part, in catalog order."""
    return families.having("evaluation")


def evaluation(modality: object) -> EvalFamily:
    """The evaluation part of the family called `modality`; InvalidInput naming the families that have one."""
    code = families.REGISTRY.get(modality) if isinstance(modality, str) else None
    if code is None or code.evaluation is None:
        have = modalities()
        known = f"{', '.join(have[:-1])} or {have[-1]}"
        why = f" ({modality} is not evaluated yet)" if isinstance(modality, str) and modality in FAMILY_NAMES else ""
        raise InvalidInput(f"modality must be {known}, not {modality!r}{why}")
    return code.evaluation
