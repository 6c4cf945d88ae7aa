"""The endpoints page's views: the model choice of the deploy form (the voice models), the deployment's status table with
costs (and each endpoint's model, the voice one with what it can do, and the price range of its pool), the running (or last) infra action with
its CLI line and output, and the delete confirmation that names what goes."""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from infra import (
    DeploymentState,
    deletion_plan,
    deployment_status,
    voice_model_label,
)
from infra.model import ROLE_PROFILES
from infra.planning import gpu_fit_line
from infra.status import HOURS_PER_DAY
from infra.pool_prices import deployment_pool_prices
from infra.progress import format_duration
from protocol.errors import StudioError
from protocol.catalog import FAMILIES, models_differ, models_of
from services.pricing import usd
from ui.lifecycle_views import lifecycle_cells
from ui.resources import code, cost_banner, plain

ACTION_LINES = 40  # lines of an action's output shown


def money(value: float | None) -> str:
    return usd(value)


def smoke(result: dict | None) -> str:
    if not result:
        return "—"
    return "ok" if result.get("ok") else "FAILED"


def model_picks(roles: list[str]) -> dict[str, str]:
    """The deploy form's model choice for each endpoint whose family's models differ in what they can do
    (protocol.catalog.models_differ: the voice models, one task type each), each option with what it can do,
    default the family's own. The choice is kept under its own key too: Streamlit forgets a widget's value on a
    run that does not draw it, and taking a family out of the endpoints and back in must not lose it."""
    state, picks = st.session_state, {}
    for fam in FAMILIES:
        default = ROLE_PROFILES[fam.name].model_id
        key, kept = f"deploy_{fam.name}_model", f"deploy_{fam.name}_model_kept"
        state.setdefault(kept, default)
        if fam.name not in roles or not models_differ(fam.name):
            continue
        state[key] = state[kept]
        picks[fam.name] = st.selectbox(
            f"{fam.title} model", [m.id for m in models_of(fam.name)], key=key, on_change=_keep, args=(key, kept),
            format_func=lambda m, d=default: voice_model_label(m) + ("  [default]" if m == d else ""),
            help=f"What the {fam.name} endpoint can do depends on its model (each option says what it can do); the "
                 f"{fam.title} page offers only what the deployed model can do.")
    return picks


def gpu_fit_captions(roles: list[str], picks: dict[str, str] | None, model_lines: list[str]) -> None:
    """Per endpoint of the form: its model and the GPU memory it needs, with the instance types that fit."""
    chosen = {**(picks or {}), **{k: v for k, v in (line.split("=", 1) for line in model_lines if "=" in line)
                                  if v.strip()}}
    for role in roles:
        model_id = (chosen.get(role) or "").strip() or ROLE_PROFILES[role].model_id
        st.caption(f"{role}: {plain(model_id)} — {plain(gpu_fit_line(model_id))}")


def _keep(key: str, kept: str) -> None:
    st.session_state[kept] = st.session_state[key]


def load_state(state_file: Path) -> DeploymentState | None:
    """The state file's deployment, None without one; an unusable file stops the page saying why."""
    if not state_file.is_file():
        return None
    try:
        return DeploymentState.load(state_file)
    except StudioError as exc:
        st.error(f"The state file cannot be used: {plain(exc)}")
        st.stop()


def status_panel(state_file: Path, profile: str | None) -> bool:
    """The cost banner and the table; True while something is still Creating (so the page keeps refreshing). The
    dollars are one computation at one instant (services.pricing.spend): the banner's, the rows' and the totals'
    cost so far agree, each labelled "(emulated)" on the local SageMaker emulator."""
    at = time.time()
    cost_banner(at=at, link=False)  # here, not above the page: redrawn with the table, at its instant
    if not state_file.is_file():
        st.info("No deployment yet. Deploy the endpoints below (or run `python -m infra deploy`).")
        return False
    try:
        report = deployment_status(state_file, profile=profile)
    except StudioError as exc:
        st.error(f"Cannot read the endpoints' status: {plain(exc)}")
        return False
    pools = pool_ranges(state_file, report)
    life = lifecycle_cells(state_file, report, profile)  # instances and time to live (infra/ttl.py, scaling.py)
    # What costs first, the long names last: a table wider than the page hides its right-hand columns
    cost = report.spend(at)
    so_far = cost.label("cost so far")
    rows = [{"endpoint": e.role or "—", "status": e.status, "$/hour": money(cost.per_hour.get(e.endpoint_name)),
             so_far: money(cost.so_far.get(e.endpoint_name)),
             "pool $/hour (min–max)": pools[e.role].range_label() if e.role in pools else "—",
             "instance": e.instance_type or "—", **life.get(e.role or "", {}), "uptime": format_duration(e.uptime_s),
             "smoke test": smoke(e.smoke), "can do": ", ".join(e.task_types) or "—", "model": e.model_id or "—",
             "GPU memory": e.gpu_fit or "—", "pool entries": pools[e.role].label().split(": ", 1)[1] if e.role in pools else "—",
             "name": e.endpoint_name}
            for e in report.endpoints]
    st.dataframe(rows, hide_index=True, width="stretch")
    a, b, c = st.columns(3)
    a.metric("Per hour", money(cost.usd_per_hour))
    b.metric("Per day", money(cost.usd_per_hour * HOURS_PER_DAY))
    c.metric(so_far.capitalize(), money(cost.cost_so_far_usd), help="the sum of the endpoints' cost so far above")
    if report.unpriced:  # a total without them would read as the whole bill
        st.warning(f"The totals leave out {plain(', '.join(report.unpriced))}: the price table has no price for it "
                   "— `python -m infra cost --refresh-prices` asks the AWS Price List API.", icon="💲")
    st.caption(f"Deployment {plain(report.deployment_id or '—')} in {plain(report.region)}; "
               "on-demand prices from the shipped table (`python -m infra cost` shows its date and source). The pool "
               "range is what each entry of the endpoint's pool costs: SageMaker takes the first with capacity."
               + (" These endpoints are the local SageMaker emulator's: their dollars price instances that never ran, "
                  "and nothing is billed." if cost.emulated else ""))
    if report.voice_model:
        st.caption(f"Voice model {plain(voice_model_label(report.voice_model))} — the voice page offers only that; "
                   "another needs a new deployment (`deploy --voice-model`).")
    for e in report.endpoints:
        if e.failure_reason:
            st.error(f"{plain(e.role or e.endpoint_name)} failed: {plain(e.failure_reason)}")
    return report.creating


def scale_up_note(state_file: Path, profile: str | None) -> str | None:
    """What a smoke test would scale up from 0 instances, its price and wait (infra.smoke.scale_up_note); None
    when nothing would, or when the status cannot be read (the smoke test then says what is wrong)."""
    from infra.smoke import scale_up_note as note

    try:
        return note(deployment_status(state_file, profile=profile))
    except StudioError:
        return None


def pool_ranges(state_file: Path, report) -> dict:
    """Role -> the priced pool (infra/pool_prices.py), the entry in use marked; {} when the file cannot say."""
    try:
        state = DeploymentState.load(state_file)
    except StudioError:
        return {}
    in_use = {e.role: e.instance_type for e in report.endpoints if e.role}
    return {p.role: p for p in deployment_pool_prices(state, report.prices, in_use)}


def action_panel(action) -> None:
    """The current (or last) action of the infra runner: its title, CLI line, output and outcome."""
    if action is None:
        return
    title = f"{action.kind} — {'running' if not action.done else ('done' if action.ok else 'failed')} " \
            f"({format_duration(action.elapsed_s)})"
    with st.container(border=True):
        st.markdown(f"**{plain(title)}**")
        st.code(action.command, language="bash")
        if action.lines:
            st.code("\n".join(action.lines[-ACTION_LINES:]), language=None)
        if action.done:
            (st.success if action.ok else st.error)(plain(action.error or action.summary or action.kind))


def delete_plan(deployment: DeploymentState, state_file: Path) -> int:
    """What a delete removes, and the CLI line; the number of resources."""
    plan = deletion_plan(deployment)
    st.warning(f"This deletes {len(plan)} resources in {plain(deployment.region)} — the instances "
               "stop billing once the endpoints are gone. S3 outputs are kept.")
    st.markdown("\n".join(f"- {plain(role)}: {kind} {code(name)}" for role, kind, name in plan))
    st.code(f"python -m infra delete --state-file {state_file}", language="bash")
    return len(plan)


def audit_panel(entries: list, *, unavailable: str | None = None) -> None:
    """The audit log: who deployed, upgraded, extended, rolled back or deleted (or was refused), and who saved
    which cloned voice with which consent — newest first; `unavailable`: why it cannot be read."""
    if unavailable is not None:
        st.warning(f"The audit log is unavailable: {plain(unavailable)}", icon="🗄️")
        return
    with st.expander(f"Audit log ({len(entries)} latest)"):
        if not entries:
            st.caption("Nothing yet: endpoint actions and saved voices are recorded here, with who did them.")
            return
        rows = [{"when (UTC)": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.at)),
                 "who": e.who + (f" ({e.role})" if e.role else ""), "action": e.action, "outcome": e.outcome,
                 "what": e.summary or e.detail.get("command", ""), "target": e.target} for e in entries]
        st.dataframe(rows, hide_index=True, width="stretch")
