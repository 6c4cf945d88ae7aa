"""Results already in the history as a variant's outputs: a SPEC variant's `kept = [ids]` (voice takes, image or
video jobs — whatever its family's part keeps: EvalFamily.keeps, kept_choices, kept).

    choices(history, "voice")                # [KeptChoice(id, label)]: what a person may pick, newest first
    spec, items = resolve(history, spec)     # the results read; their prompts added to the prompt set

A kept result becomes an item that is already `succeeded`: its media copied into the evaluation's outputs, its
figures (the kept record's id under `kept`) and what made it as its settings. It takes the place of the prompt
it was made for (its text, or its image's prompt), the first kept one of a prompt as repeat 0, the next as repeat
1 — so it is paired blind with the other variants' outputs for that prompt and repeat. Nothing is generated for
a variant of kept results; the other variants make theirs for every prompt, the kept ones' prompts included.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.errors import InvalidInput
from services.eval.family import KeptChoice
from services.eval.registry import evaluation

if TYPE_CHECKING:
    from services.eval.spec import EvalSpec


@dataclass(frozen=True)
class KeptItem:
    id: str
    variant: str
    prompt_index: int
    repeat: int
    prompt: str
    settings: dict[str, Any]
    figures: dict[str, Any]
    data: bytes


def choices(history: Any, modality: str, *, limit: int = 50) -> list[KeptChoice]:
    """The results of the actor's (and those shared) a variant of this modality may take as its outputs."""
    return evaluation(modality).kept_choices(history, limit=limit)


def resolve(history: Any, spec: EvalSpec) -> tuple[EvalSpec, list[KeptItem]]:
    """The SPEC with its kept results' prompts added (in the order met), and those results as items. InvalidInput
    names a result that is not there (or not one of the actor's, or shared), more results for one prompt than the
    repeats, and kept variants that share no prompt (nothing to compare)."""
    if not any(v.get("kept") for v in spec.variants):
        return spec, []
    part = evaluation(spec.modality)
    prompts = list(spec.prompts)
    found: list[tuple[str, Any]] = []
    for variant in spec.variants:
        for record_id in variant.get("kept") or ():
            try:
                kept = part.kept(history, record_id)
            except InvalidInput as exc:
                raise InvalidInput(f"variant {variant['label']!r}: {exc}") from None
            if kept.prompt.strip() not in prompts:
                prompts.append(kept.prompt.strip())
            found.append((variant["label"], kept))
    spec = spec.model_copy(update={"prompts": prompts})
    counts: Counter[tuple[str, int]] = Counter()
    items = []
    for label, kept in found:
        index = prompts.index(kept.prompt.strip())
        repeat = counts[(label, index)]
        counts[(label, index)] += 1
        if repeat >= spec.repeats:
            raise InvalidInput(f"variant {label!r} keeps more results for the prompt {kept.prompt[:60]!r} than the "
                               f"evaluation's {spec.repeats} repeat(s): raise repeats, or keep one result per prompt "
                               "and repeat")
        items.append(KeptItem(uuid.uuid4().hex[:10], label, index, repeat, prompts[index],
                              {"label": label, "kept": kept.id, **kept.settings}, {**kept.figures, "kept": kept.id},
                              kept.data))
    if all(v.get("kept") for v in spec.variants):
        slots = Counter((i.prompt_index, i.repeat) for i in items)
        if max(slots.values()) < 2:
            raise InvalidInput("no prompt has kept results of two variants, so there is nothing to compare: keep "
                               "results made for the same texts, or let a variant make its own")
    return spec, items
