"""The Evaluations page's definition form: name, modality, what the items are made from, and 2–4 variants — each
made on a Target with its settings, or (for a family that keeps results) taken from the history — then Create and
run (or Create only; editing: Save and run, Save changes). The form is drawn from the family's evaluation part as
data (services/eval/family.py: what it takes, its picks, what it keeps, its settings); the logic is services/eval's.

The form lives in session state under `ev_*` keys (variant i's under `ev_<i>_*`), so a refused definition keeps
everything typed.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from services.eval.family import EvalFamily
from services.eval.kept import choices as kept_choices
from services.eval.registry import evaluation, modalities
from services.eval.runner import target_offer
from services.eval.spec import TARGET_KEYS, parse_spec, read_prompts_file
from services.eval.store import EvalStore
from services.targets import option_key, spec_keys
from ui.resources import NO_UPLOADS, history, settings, uploads_allowed
from ui.target_views import picked_target, target_book, target_picker
from ui.text import plain

DEFAULT_SETTING = "(the target's default)"
MADE, KEPT = "Made on a target", "From the history"
PRICE_KEYS = ("instance_type", "price_per_hour")
DEFINE_DEFAULTS: dict[str, Any] = {"ev_name": "", "ev_modality": "image", "ev_prompts": "", "ev_repeats": 1,
                                   "ev_count": 2}
VARIANT_DEFAULTS: dict[str, Any] = {"label": "", "target": "default", "settings": "", "source": MADE, "kept": []}


def init_define_state() -> None:
    state = st.session_state
    for key, value in DEFINE_DEFAULTS.items():
        state.setdefault(key, value)
    for i in range(4):
        for name, value in (VARIANT_DEFAULTS | {"label": "ABCD"[i]}).items():
            state.setdefault(f"ev_{i}_{name}", value)


@st.cache_data(ttl=30, show_spinner=False)
def _offered(modality: str, keys: tuple[tuple[str, Any], ...]) -> tuple[list[str], ...] | None:
    """What one target offers for the family's picks, asked briefly cached; None when it does not answer."""
    return target_offer(settings(), modality)(dict(keys))


def offer_for(modality: str):
    """`offer(variant)`: what the variant's target offers (for EvalStore.create / update: check_catalog)."""
    return lambda variant: _offered(modality, tuple((k, variant.get(k)) for k in ("backend", "url", "endpoint")))


def _pickers(i: int, part: EvalFamily, offered: tuple[list[str], ...] | None) -> None:
    """Variant i's pickers of its family's `picks` (voice: Voice, Language): what its target offers, or its default."""
    state = st.session_state
    for (name, what), have in zip(part.picks.items(), offered or [[] for _ in part.picks]):
        choices, key = [DEFAULT_SETTING, *have], f"ev_{i}_{name}"
        if state.get(key) not in choices:
            state[key] = DEFAULT_SETTING
        st.selectbox(name.capitalize(), choices, key=key, help=f"the {what} the target's model offers")
    if offered is None:
        st.caption(f"The target does not answer now: only its default {' and '.join(part.picks)} are offered.")


def _kept_picker(i: int, part: EvalFamily) -> None:
    """Variant i's results from the history (the actor's and those shared), by what the family keeps."""
    found = kept_choices(history(), part.name)
    labels = {c.id: c.label for c in found}
    key = f"ev_{i}_kept"
    st.session_state[key] = [k for k in st.session_state.get(key) or [] if k in labels]
    st.multiselect(f"{str(part.keeps).capitalize()} to rate as this variant's", list(labels), key=key,
                   format_func=lambda k: labels[k], placeholder=f"pick {part.keeps}")
    if not found:
        st.caption(f"No {part.keeps} in the history yet: make some on their page first.")


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


def create_from_form(store: EvalStore, backend_name: str, backend_url: str | None, runs: Any = None) -> None:
    """Create's (or, editing, Save's) callback: the form into a checked SPEC — what each variant picks checked
    against what its target offers — and a new (or changed) evaluation, then (given `runs`) its run started on
    the studio; a refusal goes to `ev_error`, a run that cannot start to `ev_run_error`."""
    import tempfile
    state = st.session_state
    state["ev_error"] = None
    with tempfile.TemporaryDirectory() as tmp:  # uploaded recordings live here until the store has copied them
        made = _create(store, backend_name, backend_url, tmp)
    if made is not None and runs is not None and any(i.status != "succeeded" for i in store.items(made)):
        try:
            runs.start(store, made)
        except StudioError as exc:
            state["ev_run_error"] = str(exc)


def _recordings(references: list[str], tmp: str) -> list[dict[str, str]]:
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


def _variant(i: int, part: EvalFamily, offered: list[Any], backend_name: str, backend_url: str | None) -> dict:
    state = st.session_state
    label = str(state[f"ev_{i}_label"]).strip()
    if part.keeps and state.get(f"ev_{i}_source") == KEPT:
        return {"label": label, "kept": list(state.get(f"ev_{i}_kept") or [])}
    variant: dict[str, Any] = {"label": label, **_settings_text(state[f"ev_{i}_settings"], label or str(i + 1))}
    for name in part.picks:
        picked = state.get(f"ev_{i}_{name}")
        if picked and picked != DEFAULT_SETTING:
            if name in variant:
                raise InvalidInput(f"variant {label or i + 1}: {name} is picked above and typed in its settings too: "
                                   "keep one")
            variant[name] = picked
    try:
        target = picked_target(offered, f"ev_{i}_target")
    except StudioError as exc:
        raise type(exc)(f"variant {label or i + 1}: {exc}") from None
    return variant | spec_keys(target, backend_name, backend_url)


def _create(store: EvalStore, backend_name: str, backend_url: str | None, tmp: str) -> str | None:
    """The evaluation made (or changed) from the form: its id, or None when refused (`ev_error` says why)."""
    state = st.session_state
    try:
        modality = state["ev_modality"]
        part, book = evaluation(modality), target_book()
        prompts = [p.strip() for p in str(state["ev_prompts"]).splitlines() if p.strip()]
        upload = state.get("ev_upload")
        if upload is not None and part.takes == "text":
            from pathlib import Path

            path = Path(tmp) / Path(upload.name).name
            path.write_bytes(upload.getvalue())
            prompts += read_prompts_file(path)
        offered = book.options(modality)
        variants = [_variant(i, part, offered, backend_name, backend_url) for i in range(int(state["ev_count"]))]
        inputs = {"items": _recordings(prompts, tmp)} if part.takes == "audio" else {"prompts": prompts}
        spec = parse_spec({"name": state["ev_name"], "modality": modality, "repeats": int(state["ev_repeats"]),
                           "variants": variants, **inputs})
        if state.get("ev_editing"):
            state["ev_id"] = store.update(state["ev_editing"], spec, targets=book, offer=offer_for(modality)).id
            state["ev_editing"] = None
        else:
            state["ev_id"] = store.create(spec, targets=book, offer=offer_for(modality)).id
        return state["ev_id"]
    except StudioError as exc:
        state["ev_error"] = str(exc)
        return None


def _inputs(part: EvalFamily) -> None:
    """What the items are made from, by what the family takes: recordings and their references, or prompts."""
    if part.takes == "audio" and not uploads_allowed():
        st.caption(f"{NO_UPLOADS} A {part.name} evaluation needs recordings: use a studio with uploads.")
    elif part.takes == "audio":
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
        if part.keeps:
            st.caption(f"A variant may take {part.keeps} from the history as its outputs: their prompts join these, "
                       "and the other variants make theirs for them too.")


def _variant_form(i: int, part: EvalFamily, offered: list[Any], backend_name: str, backend_url: str | None) -> None:
    state = st.session_state
    st.text_input("Label", key=f"ev_{i}_label", max_chars=40)
    if part.keeps:
        st.segmented_control("Outputs", [MADE, KEPT], key=f"ev_{i}_source", required=True)
        if state.get(f"ev_{i}_source") == KEPT:
            _kept_picker(i, part)
            return
    option = target_picker(offered, f"ev_{i}_target")
    typed = part.settings
    if part.picks:
        _pickers(i, part, offer_for(part.name)(spec_keys(option, backend_name, backend_url)))
        typed = tuple(k for k in typed if k not in part.picks)
    st.text_area("Settings (name = value)", key=f"ev_{i}_settings", height=110, placeholder=part.variant.EXAMPLE,
                 help=f"{part.name} settings: {', '.join(typed)}")


def define_form(on_create, backend_name: str, backend_url: str | None, *, editing: bool = False) -> None:
    """The definition, drawn from the family's part. `on_create(run)`: Create and run (True) or Create only.
    Editing: the modality stays, and Save and run / Save changes / Cancel replace the Create buttons."""
    state = st.session_state
    c = st.columns([3, 2, 1])
    c[0].text_input("Name", key="ev_name", placeholder="0.6B vs 1.7B for the launch script")
    c[1].segmented_control("Family", list(modalities()), key="ev_modality", required=True, disabled=editing)
    c[2].number_input("Repeats", key="ev_repeats", min_value=1, max_value=100, step=1,
                      help="outputs per prompt and variant")
    part = evaluation(state["ev_modality"])
    _inputs(part)
    st.segmented_control("Variants", [2, 3, 4], key="ev_count", required=True)
    offered = target_book().options(part.name)
    for i, col in enumerate(st.columns(int(state["ev_count"]))):
        with col.container(border=True):
            _variant_form(i, part, offered, backend_name, backend_url)
    c = st.columns([1, 1, 1, 3])
    run_help = "its items are made on the studio, not in this tab: close the page, or come back later"
    if editing:
        c[0].button("Save and run", type="primary", on_click=on_create, args=(True,), key="ev_save_run",
                    help="its items are made afresh: " + run_help)
        c[1].button("Save changes", on_click=on_create, args=(False,), key="ev_save", help="run it later")
        c[2].button("Cancel", key="ev_cancel", on_click=lambda: state.update(ev_editing=None, ev_error=None))
    else:
        c[0].button("Create and run", type="primary", on_click=on_create, args=(True,), key="ev_create_run",
                    help=run_help)
        c[1].button("Create only", on_click=on_create, args=(False,), key="ev_create", help="run it later")
    if state.get("ev_error"):
        st.error(plain(state["ev_error"]))


def load_for_edit(store: EvalStore, eval_id: str, backend_name: str, backend_url: str | None) -> None:
    """Edit's callback: the evaluation's SPEC back into the definition form, to change and Save."""
    state, spec = st.session_state, store.get(eval_id).spec
    part = evaluation(spec.modality)
    state.update(ev_name=spec.name, ev_modality=spec.modality, ev_prompts="\n".join(spec.prompts),
                 ev_repeats=spec.repeats, ev_count=len(spec.variants), ev_error=None, ev_editing=eval_id)
    for i, variant in enumerate(spec.variants):
        values = spec.settings(variant["label"])
        state[f"ev_{i}_label"] = values.pop("label")
        state[f"ev_{i}_kept"] = values.pop("kept", None) or []
        state[f"ev_{i}_source"] = KEPT if state[f"ev_{i}_kept"] else MADE
        state[f"ev_{i}_target"] = option_key(values, backend_name, backend_url)
        for name in part.picks:
            state[f"ev_{i}_{name}"] = values.pop(name, None) or DEFAULT_SETTING
        rest = {k: v for k, v in values.items() if k not in TARGET_KEYS or k in PRICE_KEYS}
        state[f"ev_{i}_settings"] = "\n".join(f"{k} = {json.dumps(v)}" for k, v in rest.items())
