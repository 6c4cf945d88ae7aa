"""Blind evaluations: variants of one modality run on a prompt set, rated in pairs, reported with honest
statistics. UI-free; the Evaluations page and `python -m services eval` (services/cli/eval.py) sit on top.

    from services.eval import EvalStore, parse_spec, run_items, next_pair, record_rating, results, export_zip

    store = EvalStore(History.of(settings))                  # tables in the history DB (services/history)
    spec = parse_spec({"name": "…", "modality": "voice", "prompts": [...], "repeats": 1,
                       "variants": [{"label": "A", "voice": "vivian"}, {"label": "B", "url": "http://…"}]})
                                                             # InvalidInput naming what to fix; yes=True past 1000 items
    ev = store.create(spec)                                  # every item `pending`; ev.id
    outcome = run_items(store, ev.id, base=settings,         # only the items not `succeeded` (resumable; failed retried)
                        on_progress=lambda p: bar.progress(p["done"] / p["total"]), stop=threading_event)
                                                             # p: done, total, item, variant, status, error;
                                                             # stop.set() ends it before the next item (resume later)
    outcome.to_dict()                                        # {"id", "items", "generated", "failed", "failed_items", "stopped"}
    store.list(); store.items(ev.id, status="failed")        # Item: id, variant, prompt, status, figures, error
    store.media_path(item)                                   # the WAV / PNG / MP4 of a succeeded item

    pair = next_pair(store, ev.id, rater, skipped=set_of_pair_keys)   # Pair(item_a, item_b, prompt, …) or None
    store.media_path(store.item(pair.item_a))                # what to play / show as "1" (item_b: "2")
    record_rating(store, ev.id, pair.item_a, pair.item_b, "a" | "b" | "tie", rater)  # "a": 1 (item_a) is better
                                                             # a skip: add pair.key to `skipped`, record nothing
    res = results(store, ev.id)                              # the `eval report` JSON: variants (label, items, ratings,
                                                             # wins, losses, ties, win_rate, ci95, latency_p50_s, ttfa_p50_ms,
                                                             # cost_per_item_usd, with sample sizes), pairs, separation,
                                                             # raters, agreement
    verdicts(res)                                            # plain sentences: overlap, "about N more ratings …"
    render(res, "json" | "csv" | "md" | "html")             # the report as text (html self-contained)
    export_zip(store, ev.id, blind=False)                    # bytes of the ZIP (media, items.csv, ratings.csv, report.html)
    import_ratings(store, ev.id, csv_bytes)                  # all or nothing; InvalidInput names the line; the number
                                                             # added (a pair its rater already rated is not added again)
    import_ratings_outcome(store, ev.id, csv_bytes)          # the same, as ImportOutcome(added, already) with .text(id)

Side by side without storing (the Compare columns): for each variant's settings dict (the SPEC's variant keys),
`backend = create_backend(variant_settings(settings, modality, v))`, then `generate(backend, modality, prompt, v)`
→ (media bytes, figures: latency_s, ttfa_ms/rtf for voice, model_s when the server says); `build_request` checks
the settings first (InvalidInput naming the setting).

What differs between families is each family's part (family.py: `EvalFamily`; voice.py, image.py, video.py,
listen.py), registered in its module in services/families and found by `registry.evaluation(name)`.

Modules: spec.py (the SPEC), store.py (tables, items, ratings), kept.py (results from the history as a variant's
outputs), runner.py (items through the studio's clients, one backend per variant target), pairing.py (the blind
schedule), stats.py (the formulas), rated.py (a rated family's report), report.py (results and renderings),
table.py (the short table a page shows), export.py (ZIPs, the blind sheet, the import).

The names below are imported when first used: the family registry imports the parts (services/eval/<family>.py),
which must not load the whole package — nor, through it, the registry again.
"""

from typing import Any

__all__ = [
    "EvalSpec", "EvalStore", "ImportOutcome", "Item", "Pair", "RunOutcome", "build_request", "export_zip", "generate",
    "import_ratings", "import_ratings_outcome", "load_spec", "next_pair", "parse_spec", "record_rating", "render",
    "results", "run_items", "schedule", "variant_settings", "verdicts",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'services.eval' has no attribute {name!r}")
    from services.eval import export, pairing, report, requests, runner, spec, store

    for module in (export, pairing, report, requests, runner, spec, store):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(name)
