"""The Evaluations page's views: define (variants and a prompt set), run (progress, resumable), review blind
(two outputs as 1 and 2, the rater asked once), results (win rates with 95 % Wilson intervals, the pairwise
matrix, latency and cost, a chart, plain verdicts) and export. The logic is services/eval's.

The definition form lives in session state under `ev_*` keys (variant i's under `ev_<i>_*`), so a refused
definition keeps everything typed.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from protocol.errors import InvalidInput, StudioError
from services.eval.export import export_zip, import_ratings_outcome
from services.eval.pairing import Pair, next_pair, record_rating
from services.eval.report import render, results, variant_rows, verdicts, wer_lines
from services.eval.runner import speech_offer
from services.eval.runs import EvalRuns
from services.eval.spec import SETTINGS, TARGET_KEYS, VARIANT_MODELS, parse_spec, read_prompts_file
from services.eval.store import EvalStore
from services.targets import option_key, spec_keys
from ui.media_views import when
from ui.resources import NO_UPLOADS, plain, settings, uploads_allowed
from ui.target_views import picked_target, target_book, target_picker
from ui.workspace_views import owner_of

# Valid on every target: a voice and a language are picked from what the variant's target offers, not typed.
EXAMPLES = {m: cls.EXAMPLE for m, cls in VARIANT_MODELS.items()}
DEFAULT_SETTING = "(the target's default)"
PICKED = {"voice": "Voice", "language": "Language"}  # voice settings picked from what the target offers
VERDICT = {"a": "1 is better", "b": "2 is better", "tie": "Tie"}
SHORTCUT = {"a": "1", "b": "2", "tie": "t"}


DEFINE_DEFAULTS: dict[str, Any] = {"ev_name": "", "ev_modality": "image", "ev_prompts": "", "ev_repeats": 1,
                                   "ev_count": 2}
VARIANT_DEFAULTS = {"label": "", "target": "default", "settings": "", "voice": DEFAULT_SETTING,
                    "language": DEFAULT_SETTING}


def init_define_state() -> None:
    state = st.session_state
    for key, value in DEFINE_DEFAULTS.items():
        state.setdefault(key, value)
    for i in range(4):
        for name, value in (VARIANT_DEFAULTS | {"label": "ABCD"[i]}).items():
            state.setdefault(f"ev_{i}_{name}", value)


@st.cache_data(ttl=30, show_spinner=False)
def _offered(keys: tuple[tuple[str, Any], ...]) -> tuple[list[str], list[str]] | None:
    """(voices, languages) of one target's speech model, asked briefly cached; None when it does not answer."""
    return speech_offer(settings())(dict(keys))


def offer(variant: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """What the variant's target offers (for EvalStore.create / update: services.eval.spec.check_catalog)."""
    return _offered(tuple((k, variant.get(k)) for k in ("backend", "url", "endpoint")))


def _speech_pickers(i: int, offered: tuple[list[str], list[str]] | None) -> None:
    """Variant i's Voice and Language pickers: what its target offers, or its default."""
    state = st.session_state
    for (name, title), have in zip(PICKED.items(), offered or ([], [])):
        choices, key = [DEFAULT_SETTING, *have], f"ev_{i}_{name}"
        if state.get(key) not in choices:
            state[key] = DEFAULT_SETTING
        st.selectbox(title, choices, key=key, help=f"the {name}s the target's model offers")
    if offered is None:
        st.caption("The target does not answer now: only its default voice and language are offered.")


def _settings_text(text: str, label: str) -> dict[str, Any]:
    """`key = value` lines (TOML values; a bare word is a text) into a dict, naming a line it cannot read."""
    out: dict[str, Any] = {}
    for n, line in enumerate(str(text).splitlines(), 1):
        if not line.strip() or line.strip().startswith("#"):
            continue
        if "=" not in line:
            raise InvalidInput(f"variant {label}, settings line {n}: write `name = value` (got {line.strip()!r})")
        try:
            out.update(tomllib.loads(line))
        except tomllib.TOMLDecodeError:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    # Where a variant runs is its Target picker's (the studio's closed set); the price keys stay settings.
    aimed = [k for k in out if str(k).replace("-", "_") in TARGET_KEYS and k not in PRICE_KEYS]
    if aimed:
        raise InvalidInput(f"variant {label}: {', '.join(aimed)} cannot be set here — pick the variant's Target "
                           "above (a state file, profile or region only on the command line)")
    return out


PRICE_KEYS = ("instance_type", "price_per_hour")


def create_from_form(store: EvalStore, backend_name: str, backend_url: str | None) -> None:
    """Create's (or, editing, Save's) callback: the form into a checked SPEC — the voices and languages checked
    against what each variant's target offers — and a new (or changed) evaluation; a refusal goes to
    `ev_error`."""
    import tempfile
    state = st.session_state
    state["ev_error"] = None
    with tempfile.TemporaryDirectory() as tmp:  # listen uploads live here until the store has copied them
        _create(store, backend_name, backend_url, tmp)


def _listen_items(references: list[str], tmp: str) -> list[dict[str, str]]:
    """The uploaded recordings (in the order given) written under `tmp`, each with its line of references."""
    from pathlib import Path

    uploads = st.session_state.get("ev_audio") or []
    if not uploads:
        raise InvalidInput("give the recordings to transcribe (upload them above)")
    if len(uploads) != len(references):
        raise InvalidInput(f"{len(uploads)} recordings but {len(references)} reference lines: give one line of text "
                           "spoken per recording, in the same order")
    items = []
    for n, (upload, reference) in enumerate(zip(uploads, references)):
        path = Path(tmp) / f"{n:04d}-{Path(upload.name).name}"
        path.write_bytes(upload.getvalue())
        items.append({"audio": str(path), "reference": reference})
    return items


def _create(store: EvalStore, backend_name: str, backend_url: str | None, tmp: str) -> None:
    state = st.session_state
    try:
        prompts = [p.strip() for p in str(state["ev_prompts"]).splitlines() if p.strip()]
        upload = state.get("ev_upload")
        if upload is not None and state["ev_modality"] != "listen":
            from pathlib import Path

            path = Path(tmp) / Path(upload.name).name
            path.write_bytes(upload.getvalue())
            prompts += read_prompts_file(path)
        variants, book, modality = [], target_book(), state["ev_modality"]
        offered = book.options(modality)
        for i in range(int(state["ev_count"])):
            label = str(state[f"ev_{i}_label"]).strip()
            variant: dict[str, Any] = {"label": label, **_settings_text(state[f"ev_{i}_settings"], label or str(i + 1))}
            for name in PICKED if modality == "voice" else ():
                picked = state.get(f"ev_{i}_{name}")
                if picked and picked != DEFAULT_SETTING:
                    if name in variant:
                        raise InvalidInput(f"variant {label or i + 1}: {name} is picked above and typed in its "
                                           "settings too: keep one")
                    variant[name] = picked
            try:
                target = picked_target(offered, f"ev_{i}_target")
            except StudioError as exc:
                raise type(exc)(f"variant {label or i + 1}: {exc}") from None
            variants.append(variant | spec_keys(target, backend_name, backend_url))
        listen = modality == "listen"
        spec = parse_spec({"name": state["ev_name"], "modality": modality, "repeats": int(state["ev_repeats"]),
                           "variants": variants,
                           **({"items": _listen_items(prompts, tmp)} if listen else {"prompts": prompts})})
        if state.get("ev_editing"):
            state["ev_id"] = store.update(state["ev_editing"], spec, targets=book, offer=offer).id
            state["ev_editing"] = None
        else:
            state["ev_id"] = store.create(spec, targets=book, offer=offer).id
    except StudioError as exc:
        state["ev_error"] = str(exc)


def define_form(on_create, backend_name: str, backend_url: str | None, *, editing: bool = False) -> None:
    """The definition: name, modality, prompts, and per variant a label, a Target, for voice a Voice and a
    Language picked from what that target offers, and other settings as `name = value` lines. Editing: the
    modality stays, and Save changes / Cancel replace Create."""
    state = st.session_state
    c = st.columns([3, 2, 1])
    c[0].text_input("Name", key="ev_name", placeholder="0.6B vs 1.7B for the launch script")
    c[1].segmented_control("Modality", list(SETTINGS), key="ev_modality", required=True, disabled=editing)
    c[2].number_input("Repeats", key="ev_repeats", min_value=1, max_value=100, step=1,
                      help="outputs per prompt and variant")
    if state["ev_modality"] == "listen" and not uploads_allowed():
        st.caption(f"{NO_UPLOADS} A listen evaluation needs recordings: use a studio with uploads.")
    elif state["ev_modality"] == "listen":
        st.file_uploader("Recordings to transcribe (kept with the evaluation)", accept_multiple_files=True,
                         type=["wav", "mp3", "flac", "ogg", "opus", "webm", "m4a", "mp4"], key="ev_audio")
        st.text_area("References: the text spoken in each recording, one line per recording, in the same order",
                     key="ev_prompts", height=120)
        st.caption("Each variant transcribes every recording; its word error rate against the references is the "
                   "result (no blind rating).")
    else:
        st.text_area("Prompts, one per line", key="ev_prompts", height=120)
        if uploads_allowed():
            st.file_uploader("Or a prompt file (.txt one per line, .csv first column)", type=["txt", "csv"],
                             key="ev_upload")
    st.segmented_control("Variants", [2, 3, 4], key="ev_count", required=True)
    modality = state["ev_modality"]
    offered = target_book().options(modality)
    for i, col in enumerate(st.columns(int(state["ev_count"]))):
        with col.container(border=True):
            st.text_input("Label", key=f"ev_{i}_label", max_chars=40)
            option = target_picker(offered, f"ev_{i}_target")
            typed = SETTINGS[modality]
            if modality == "voice":
                _speech_pickers(i, offer(spec_keys(option, backend_name, backend_url)))
                typed = tuple(k for k in typed if k not in PICKED)
            st.text_area("Settings (name = value)", key=f"ev_{i}_settings", height=110, placeholder=EXAMPLES[modality],
                         help=f"{modality} settings: {', '.join(typed)}")
    if editing:
        c = st.columns([1, 1, 4])
        c[0].button("Save changes", type="primary", on_click=on_create, key="ev_save",
                    help="its items are made afresh: run it again")
        c[1].button("Cancel", key="ev_cancel", on_click=lambda: state.update(ev_editing=None, ev_error=None))
    else:
        st.button("Create evaluation", type="primary", on_click=on_create, key="ev_create")
    if state.get("ev_error"):
        st.error(plain(state["ev_error"]))


def _load_for_edit(store: EvalStore, eval_id: str, backend_name: str, backend_url: str | None) -> None:
    """Edit's callback: the evaluation's SPEC back into the definition form, to change and Save."""
    state, spec = st.session_state, store.get(eval_id).spec
    state.update(ev_name=spec.name, ev_modality=spec.modality, ev_prompts="\n".join(spec.prompts),
                 ev_repeats=spec.repeats, ev_count=len(spec.variants), ev_error=None, ev_editing=eval_id)
    for i, variant in enumerate(spec.variants):
        values = spec.settings(variant["label"])
        state[f"ev_{i}_label"] = values.pop("label")
        state[f"ev_{i}_target"] = option_key(values, backend_name, backend_url)
        for name in PICKED:
            state[f"ev_{i}_{name}"] = values.pop(name, None) or DEFAULT_SETTING
        rest = {k: v for k, v in values.items() if k not in TARGET_KEYS or k in PRICE_KEYS}
        state[f"ev_{i}_settings"] = "\n".join(f"{k} = {json.dumps(v)}" for k, v in rest.items())


def _delete(store: EvalStore, eval_id: str) -> None:
    try:
        store.delete(eval_id)
    except StudioError as exc:
        st.session_state["ev_manage_error"] = str(exc)
    else:
        st.session_state.update(ev_id=None, ev_notice=f"Deleted evaluation {eval_id}, its items, ratings and outputs.")


def manage_section(store: EvalStore, eval_id: str, backend_name: str, backend_url: str | None) -> None:
    """Edit (only while nobody has rated it) and Delete, for its owner or an admin (the store checks again)."""
    ev, actor = store.get(eval_id), store.actor
    if not (actor.can("evaluate") and (store.history.owns(ev) or actor.role == "admin")):
        return
    rated = len(store.ratings(eval_id))
    with st.expander("Edit or delete"):
        if ev.modality == "listen":
            st.caption("Its recordings stay as they were given: make a new evaluation to change them.")
        elif rated:
            st.caption(f"It has {rated} rating{'' if rated == 1 else 's'}: what was rated stays as it was, so it can "
                       "no longer be edited — make a new evaluation from its SPEC instead.")
        else:
            st.button("Edit", key="ev_edit", on_click=_load_for_edit, args=(store, eval_id, backend_name, backend_url),
                      help="change its name, prompts and variants; its items are made afresh")
        st.button("Delete this evaluation", key="ev_delete", type="primary", on_click=_delete, args=(store, eval_id),
                  help="removes it, its items, its ratings and its outputs for good")
    if error := st.session_state.pop("ev_manage_error", None):
        st.error(plain(error))


def evaluation_label(e: dict[str, Any]) -> str:
    """The picker's label: stable (no counts: a label that changes makes the browser send the picker back to its
    first option), with whose it is when not this person's."""
    by = owner_of(e.get("user_id"))
    label = f"{e['name']} · {e['modality']} · {e['items']} items · {when(e['created_at'])}"
    return f"{label} · {by}" if by else label


def run_section(store: EvalStore, eval_id: str, runs: EvalRuns) -> bool:
    """Counts by status; while a run goes on (on this replica or another) its progress and Stop, else Run (or
    Continue / Retry the failed) and how the last run ended; the failed items. Only the evaluation's owner runs
    it (the service checks again: EvalStore.check_runner). Returns whether a run goes on (the page then
    refreshes this part)."""
    state = st.session_state
    run = runs.state(store, eval_id)  # first: a run that has ended has written all its items before its note
    items = store.items(eval_id)
    done = sum(i.status == "succeeded" for i in items)
    failed = [i for i in items if i.status == "failed"]
    ev = store.get(eval_id)
    may_run = store.history.owns(ev) and store.actor.can("evaluate")
    st.caption(f"{done} of {len(items)} items made · {len(failed)} failed · {len(items) - done - len(failed)} to do")
    if run.running:
        moved = (run.note or {}).get("taken_over_from")
        where = "" if run.replica == runs.replica else f" on {run.replica}"  # another replica of a team studio
        if moved:
            where = f" on {run.replica}, carried on after {moved} stopped answering"
        st.progress(done / max(1, len(items)), text=plain(f"Generating{where} · {done} of {len(items)} made"))
        if run.stop_asked:
            st.caption("Stopping after the item being made…")
        elif may_run:
            st.button("Stop (Continue picks up the rest)", key="ev_stop", on_click=_stop_run, args=(runs, store, eval_id))
        else:
            st.caption(plain(f"{ev.user_id} runs it; this page follows it."))
    else:
        if run.note and run.note.get("ended_at"):
            st.caption(plain(_last_run(run.note)))
        if done < len(items) and not may_run:
            st.caption(plain(f"Only {ev.user_id}, who made it, runs its items."))
        elif done < len(items):
            st.button("Run" if done == 0 and not failed else "Continue (only what is missing)", type="primary",
                      key="ev_run", on_click=_start_run, args=(runs, store, eval_id),
                      help="it runs on the studio, not in this tab: close the page, or come back later")
    if error := state.pop("ev_run_error", None):
        st.error(plain(error))
    for item in failed:
        st.error(plain(f"{item.variant} · {item.prompt[:60]}: {item.error}"))
    return run.running


def _last_run(note: dict[str, Any]) -> str:
    """One line on how the last run ended (and, when its replica stopped answering, where it was carried on)."""
    parts = [f"{note.get('generated', 0)} made", f"{note.get('failed', 0)} failed"]
    if note.get("stopped"):
        parts.append("stopped")
    line = f"Last run, ended {when(note['ended_at'])}: {', '.join(parts)}."
    if note.get("error"):
        line += f" It ended with an error: {note['error']}"
    if note.get("taken_over_from"):
        line += (f" It was carried on by {note.get('replica')} after {note['taken_over_from']} stopped answering; "
                 "what was made before was kept.")
    return line


def _start_run(runs: EvalRuns, store: EvalStore, eval_id: str) -> None:
    try:
        runs.start(store, eval_id)
    except StudioError as exc:
        st.session_state["ev_run_error"] = str(exc)


def _stop_run(runs: EvalRuns, store: EvalStore, eval_id: str) -> None:
    try:
        runs.stop(store, eval_id)
    except StudioError as exc:
        st.session_state["ev_run_error"] = str(exc)


def _media(store: EvalStore, modality: str, item_id: str) -> None:
    data = store.media(store.item(item_id))
    if data is None:
        st.warning("the output file is missing")
    elif modality == "image":
        st.image(data, width="stretch")
    elif modality == "voice":
        st.audio(data, format="audio/wav")
    else:
        st.video(data, format="video/mp4")


def _rate(store: EvalStore, eval_id: str, pair: Pair, winner: str, rater: str) -> None:
    if winner == "skip":
        st.session_state.setdefault("ev_skipped", set()).add(pair.key)
        return
    record_rating(store, eval_id, pair.item_a, pair.item_b, winner, rater)


def review_section(store: EvalStore, eval_id: str, modality: str) -> None:
    """The rater's name (asked once; a signed-in person's own name), then the next unrated pair as 1 and 2 with
    the four buttons. Rating needs a role that may evaluate."""
    state = st.session_state
    actor = store.actor
    if modality == "listen":
        st.info("Blind rating is not needed here: a word error rate is objective — each variant's transcripts are "
                "compared with the references, and the results below say how it went.")
        return
    if not actor.can("evaluate"):
        st.caption(f"Rating is for creators and admins; you are a {actor.role}. The results below are open to you.")
        return
    if not state.get("ev_rater") and actor.signed_in:
        state["ev_rater"] = actor.name
    if not state.get("ev_rater"):
        name = st.text_input("Your name (asked once; your ratings are kept under it)", key="ev_rater_input")
        if st.button("Start rating", key="ev_rater_go") and name.strip():
            state["ev_rater"] = name.strip()
            st.rerun()
        return
    rater = state["ev_rater"]
    pair = next_pair(store, eval_id, rater, skipped=state.get("ev_skipped"))
    if pair is None:
        st.success(f"{plain(rater)}: every pair is rated (or skipped). Reveal the results below.")
        return
    st.caption(f"Rating as **{plain(rater)}** · outputs in random order; which variant made which stays hidden.")
    st.markdown(f"**Prompt:** {plain(pair.prompt)}")
    for n, (col, item_id) in enumerate(zip(st.columns(2), (pair.item_a, pair.item_b)), 1):
        with col.container(border=True):
            st.markdown(f"### {n}")
            _media(store, modality, item_id)
    c = st.columns(4)
    for col, winner in zip(c, ("a", "b", "tie", "skip")):
        col.button(VERDICT.get(winner, "Skip"), key=f"ev_rate_{winner}", width="stretch", shortcut=SHORTCUT.get(winner, "s"),
                   on_click=_rate, args=(store, eval_id, pair, winner, rater))


# The results table's columns for people (the data and the exports keep the snake_case keys)
VARIANT_LABELS = {"label": "variant", "win_rate": "win rate", "ci95_low": "95 % low", "ci95_high": "95 % high",
                  "latency_p50_s": "latency p50 (s)", "latency_p95_s": "latency p95 (s)", "latency_n": "latencies",
                  "ttfa_p50_ms": "first audio p50 (ms)", "ttfa_p95_ms": "first audio p95 (ms)",
                  "cost_per_item_usd": "cost per item (USD)", "wer": "WER (corpus)", "wer_ci95_low": "WER 95 % low",
                  "wer_ci95_high": "WER 95 % high", "ref_words": "reference words", "word_errors": "word errors",
                  "intelligibility_wer": "intelligibility WER", "intelligibility_ci95_low": "intelligibility 95 % low",
                  "intelligibility_ci95_high": "intelligibility 95 % high", "intelligibility_n": "takes heard",
                  "intelligibility_words": "words spoken"}
CHART_ROW_PX = 56  # the win-rate chart's height per variant


def results_section(store: EvalStore, eval_id: str) -> None:
    """Per variant figures, the chart of win rates with intervals, the verdicts, the matrix, raters, exports."""
    res = results(store, eval_id)
    rows = variant_rows(res)
    st.dataframe(pd.DataFrame(rows).dropna(axis=1, how="all").rename(columns=VARIANT_LABELS), hide_index=True,
                 width="stretch")
    if res["modality"] == "listen":
        _wer_chart(rows)
        for line in [*wer_lines(res), *verdicts(res)]:
            st.markdown(plain(line))
        _exports(store, eval_id, res)
        return
    for line in wer_lines(res):
        st.caption(plain(line))
    chart = pd.DataFrame([r for r in rows if r["win_rate"] is not None])
    if not chart.empty:
        # A band per variant, tall enough to read (Streamlit's default height squashed 2–4 rows into a strip)
        base = alt.Chart(chart).encode(y=alt.Y("label:N", title=None, sort=None))
        st.altair_chart((base.mark_rule(strokeWidth=4).encode(
            x=alt.X("ci95_low:Q", title="win rate (95 % interval)", scale=alt.Scale(domain=[0, 1])), x2="ci95_high:Q")
            + base.mark_point(filled=True, size=120).encode(x="win_rate:Q")).properties(
                height=max(CHART_ROW_PX * 2, CHART_ROW_PX * len(chart))), width="stretch")
    for line in verdicts(res):
        st.markdown(plain(line))
    st.caption("Pairwise: the row's wins–losses–ties against the column")
    labels = [v["label"] for v in res["variants"]]
    matrix = pd.DataFrame({a: {b: f"{c['wins']}–{c['losses']}–{c['ties']}" for b, c in row.items()}
                           for a, row in res["pairs"].items()}).T
    st.dataframe(matrix.reindex(index=labels, columns=labels).fillna("—"))
    if res["raters"]:
        st.caption("Raters: " + ", ".join(f"{r['name']} ({r['ratings']})" for r in res["raters"]))
    for a in res["agreement"]:
        kappa = "—" if a["kappa"] is None else f"{a['kappa']:.2f}"
        st.caption(plain(f"{a['raters'][0]} and {a['raters'][1]} agree on {a['percent_agreement']:.0%} of the "
                         f"{a['n']} pairs both rated (Cohen's kappa {kappa})"))
    _exports(store, eval_id, res)


def _wer_chart(rows: list[dict[str, Any]]) -> None:
    """Each variant's corpus WER (a point) and its bootstrap 95 % interval (a band)."""
    chart = pd.DataFrame([r for r in rows if r["wer"] is not None])
    if chart.empty:
        return
    base = alt.Chart(chart).encode(y=alt.Y("label:N", title=None, sort=None))
    st.altair_chart((base.mark_rule(strokeWidth=4).encode(
        x=alt.X("wer_ci95_low:Q", title="word error rate (95 % bootstrap interval)", axis=alt.Axis(format="%")),
        x2="wer_ci95_high:Q") + base.mark_point(filled=True, size=120).encode(x="wer:Q")).properties(
            height=max(CHART_ROW_PX * 2, CHART_ROW_PX * len(chart))), width="stretch")


def _exports(store: EvalStore, eval_id: str, res: dict[str, Any]) -> None:
    """The downloads (a listen evaluation has no blind sheet) and, for a rated one, the ratings import."""
    listen = res["modality"] == "listen"
    c = st.columns(4)
    c[0].download_button("Export ZIP", lambda: export_zip(store, eval_id), file_name=f"{eval_id}.zip",
                         mime="application/zip", on_click="ignore", key="ev_zip")
    if not listen:
        c[1].download_button("Blind sheet ZIP", lambda: export_zip(store, eval_id, blind=True),
                             file_name=f"{eval_id}-blind.zip", mime="application/zip", on_click="ignore",
                             key="ev_blind")
    c[2].download_button("Report HTML", render(res, "html"), file_name=f"{eval_id}.html", mime="text/html",
                         on_click="ignore", key="ev_html")
    c[3].download_button("Results JSON", render(res, "json"), file_name=f"{eval_id}.json", mime="application/json",
                         on_click="ignore", key="ev_json")
    if listen or not store.actor.can("evaluate") or not uploads_allowed():
        return
    upload = st.file_uploader("Import a filled ratings CSV (item_a, item_b, winner, rater)", type=["csv"],
                              key="ev_import")
    if upload is not None and st.button("Import ratings", key="ev_import_go"):
        try:
            st.success(import_ratings_outcome(store, eval_id, upload.getvalue()).text(eval_id))
        except StudioError as exc:
            st.error(plain(exc))
