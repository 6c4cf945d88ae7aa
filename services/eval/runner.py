"""Run an evaluation's missing items through the studio's own clients, one backend per variant target.

Each variant's target is built with services.create_backend from the settings (the studio's, with the
variant's backend / url / endpoint / region / profile / state_file over them) and checked with its health
first. A variant whose target is down or whose request fails: its items are marked `failed` with the message,
the other variants continue, and a later run (or `--resume ID`) retries exactly the items not `succeeded`.

Cost: a variant's target is priced as a load sweep prices it (services/load/target.py: a SageMaker endpoint
at the price table's rate for its instance type; a vLLM-Omni server when `instance_type` or `price_per_hour`
is given; the offline engine only with `price_per_hour`). An item's `cost_usd` is that hourly price × the
item's wall time (latency_s), by services.pricing.cost_of_seconds: the instance time it took, items running one at a time. Unpriced
targets leave `cost_usd` out, and the report's cost per item is null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.errors import StudioError
from services.eval.family import EvalFamily
from services.eval.registry import evaluation
from services.eval.spec import EvalSpec
from services.eval.store import EvalStore
from services.pricing import cost_of_seconds
from services.settings import Settings
from services.targets import target_overrides

Progress = Callable[[dict[str, Any]], None]


@dataclass
class RunOutcome:
    id: str
    items: int
    generated: int = 0
    failed: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False  # `stop` was set: the rest is still pending

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "items": self.items, "generated": self.generated, "failed": len(self.failed),
                "failed_items": self.failed, "stopped": self.stopped}


def variant_settings(base: Settings, modality: str, settings: dict[str, Any]) -> Settings:
    """The studio's settings with the variant's target over them (`url` alone means backend server)."""
    changes = target_overrides(modality, backend=settings.get("backend"), url=settings.get("url"),
                               endpoint=settings.get("endpoint"))
    for key in ("region", "profile", "state_file"):
        if settings.get(key):
            changes[key] = settings[key]
    return base.with_overrides(**changes) if changes else base


def generate(backend: Any, modality: str, prompt: str, settings: dict[str, Any], *,
             recording: bytes | None = None, name: str = "the recording") -> tuple[bytes, dict[str, Any]]:
    """One item, made by its family's part (services/eval/family.py): its media bytes and figures (latency_s
    always; voice: ttfa_ms and rtf; model_s if told; listen: the transcript of `recording` and its errors, words
    and wer against `prompt`, the reference)."""
    return evaluation(modality).generate(backend, prompt, settings, recording=recording, name=name)


def run_items(store: EvalStore, eval_id: str, *, base: Settings, on_progress: Progress | None = None,
              backend_factory: Callable[[Settings], Any] | None = None, stop: Any = None) -> RunOutcome:
    """Generate every item of the evaluation that is not `succeeded` (failed ones are retried).

    `on_progress({"done", "total", "item", "variant", "status", "error"})` is called after each item; raising
    from it (or Ctrl-C) stops the run, and what was stored stays stored. `stop` (a threading.Event, for a page's
    Stop button) ends the run before the next item: `outcome.stopped`, the rest left `pending`. Only the
    evaluation's owner runs it, with a role that may evaluate (`store.check_runner`: Forbidden otherwise)."""
    from services.backend import create_backend
    from services.targets import TargetBook
    factory = backend_factory or create_backend
    ev = store.check_runner(eval_id)  # Forbidden before anything is built or sent: not the owner, or no role
    spec: EvalSpec = ev.spec
    # The targets again, as they are now (a server removed, a SPEC made elsewhere): the closed set or nothing.
    TargetBook(base, store.history).check_variant_keys(store.actor, spec.modality, spec.variants)
    all_items = store.items(eval_id)
    todo = [i for i in all_items if i.status != "succeeded"]
    outcome = RunOutcome(eval_id, len(all_items))
    part = evaluation(spec.modality)
    hearer = _Hearer(base, spec.intelligibility, factory, part) if todo and spec.intelligibility else None
    done = len(all_items) - len(todo)
    for label in spec.labels:
        mine = [i for i in todo if i.variant == label]
        if stop is not None and stop.is_set():
            outcome.stopped = True
            break
        if not mine:
            continue
        backend, problem = None, None
        usd_per_hour = None
        try:
            vs = spec.settings(label)
            settings = variant_settings(base, spec.modality, vs)
            backend = factory(settings)
            health = backend.health()
            if not health.ok:
                problem = f"variant {label!r}: its target {backend.target} is down ({health.detail})"
            else:
                from services.load.target import describe_target
                usd_per_hour = describe_target(backend, settings, spec.modality, instance_type=vs.get("instance_type"),
                                               usd_per_hour=vs.get("price_per_hour")).usd_per_hour
        except StudioError as exc:
            problem = f"variant {label!r}: {exc}"
        try:
            for item in mine:
                if stop is not None and stop.is_set():
                    outcome.stopped = True
                    break
                error = problem
                if error is None:
                    try:
                        _make(store, ev, part, backend, item, usd_per_hour, hearer)
                        outcome.generated += 1
                    except StudioError as exc:
                        error = f"variant {label!r}: {exc}"
                    except Exception as exc:  # an unforeseen failure stays this item's; the others go on
                        error = f"variant {label!r}: {type(exc).__name__}: {exc}"
                if error is not None:
                    store.fail(item, error)
                    outcome.failed.append({"item": item.id, "variant": label, "prompt": item.prompt, "error": error})
                done += 1
                if on_progress:
                    on_progress({"done": done, "total": len(all_items), "item": item.id, "variant": label,
                                 "status": "failed" if error else "succeeded", "error": error})
        finally:
            if backend is not None:
                backend.close()
    if hearer is not None:
        hearer.close()
    return outcome


def _make(store: EvalStore, ev: Any, part: EvalFamily, backend: Any, item: Any, usd_per_hour: float | None,
          hearer: Any) -> None:
    """One item generated, priced, heard (its outputs measured on the `heard_by` target) and stored."""
    recording, name = None, ""
    if part.takes == "audio":  # the item's recording, kept with the evaluation
        recording, name = store.recording(ev, item.prompt_index), Path(ev.spec.audio[item.prompt_index]).name
        if recording is None:
            raise StudioError(f"its recording {store.recording_name(ev, item.prompt_index)} is gone from the studio's "
                              "media: make the evaluation again")
    data, figures = part.generate(backend, item.prompt, item.settings, recording=recording, name=name)
    if usd_per_hour is not None:
        figures |= {"usd_per_hour": usd_per_hour, "cost_usd": cost_of_seconds(usd_per_hour, figures["latency_s"])}
    if hearer is not None:
        figures |= hearer.hear(data, item.prompt)
    store.succeed(item, data, figures, ev.modality)


class _Hearer:
    """The target an evaluation's outputs are measured on (a voice evaluation's listen target: its
    intelligibility), built on first use and kept for the run (the part's `heard_by` and `hear`)."""

    def __init__(self, base: Settings, setting: dict[str, Any], factory: Callable[[Settings], Any],
                 part: EvalFamily) -> None:
        self.base, self.setting, self.factory, self.part = base, setting, factory, part
        self.backend: Any = None
        self.problem: str | None = None

    def hear(self, data: bytes, text: str) -> dict[str, Any]:
        if self.backend is None and self.problem is None:
            try:
                self.backend = self.factory(variant_settings(self.base, str(self.part.heard_by), self.setting))
            except StudioError as exc:
                self.problem = f"the intelligibility target: {exc}"
        if self.problem is not None:
            return {"intel_error": self.problem}
        return self.part.hear(self.backend, data, text, self.setting)

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


def target_offer(base: Settings, modality: str, *, backend_factory: Callable[[Settings], Any] | None = None
                 ) -> Callable[[dict[str, Any]], Any]:
    """`offer(variant settings)` for services.eval.spec.check_catalog: what the variant's target offers for its
    family's `picks` (voice: its voices and languages), asked now; None when it cannot be asked (down: its run
    says so, item by item)."""
    from services.backend import create_backend
    factory = backend_factory or create_backend
    part = evaluation(modality)

    def offer(settings: dict[str, Any]) -> tuple[list[str], ...] | None:
        backend = None
        try:
            backend = factory(variant_settings(base, modality, settings))
            return part.offer(backend)
        except StudioError:
            return None
        finally:
            if backend is not None:
                backend.close()
    return offer
