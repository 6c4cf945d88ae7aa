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

Modules: spec.py (the SPEC), store.py (tables, items, ratings), runner.py (items through the studio's clients,
one backend per variant target), pairing.py (the blind schedule), stats.py (the formulas), report.py (results
and renderings), export.py (ZIPs, the blind sheet, the import).
"""

from services.eval.export import ImportOutcome, export_zip, import_ratings, import_ratings_outcome
from services.eval.pairing import Pair, next_pair, record_rating, schedule
from services.eval.report import render, results, verdicts
from services.eval.requests import build_request
from services.eval.runner import RunOutcome, generate, run_items, variant_settings
from services.eval.spec import EvalSpec, load_spec, parse_spec
from services.eval.store import EvalStore, Item

__all__ = [
    "EvalSpec", "EvalStore", "ImportOutcome", "Item", "Pair", "RunOutcome", "build_request", "export_zip", "generate",
    "import_ratings", "import_ratings_outcome", "load_spec", "next_pair", "parse_spec", "record_rating", "render",
    "results", "run_items", "schedule", "variant_settings", "verdicts",
]
