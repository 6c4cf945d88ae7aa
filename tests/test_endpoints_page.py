"""The endpoints page and the cost banner with Streamlit's AppTest (the real app.py navigation), against the
local SageMaker emulator: deploy from the page with live progress and the CLI line, the status table with
cost and smoke result, the banner on other pages, and a delete that names what goes before it goes."""

from __future__ import annotations

import re

import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
ENDPOINTS = "pages/endpoints.py"


def _open(monkeypatch: pytest.MonkeyPatch, tmp: Path, page: str = ENDPOINTS) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")  # set empty: no studio.toml at all
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp / "state.json"))
    monkeypatch.setenv("OMNI_STUDIO_INFRA_POLL_S", "0.05")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "sagemaker")
    monkeypatch.setenv("SAGEMAKER_EXECUTION_ROLE_ARN", ROLE_ARN)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page)
    at.run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, at.exception[0].message if at.exception else ""


def _button(at: AppTest, key: str):
    return at.button(key=key)


def _until(at: AppTest, done, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out; page shows: {[c.value for c in at.code]}"
        time.sleep(0.2)
        at.run()
        _ok(at)


def _codes(at: AppTest) -> str:
    return "\n".join(str(c.value) for c in at.code)


def _text(markdown: str) -> str:
    """Shown text without the escapes that keep it from being read as markdown (ui.text.plain)."""
    return markdown.replace("\\", "")


def _listing(emulator: EmulatorHandle) -> list[int]:
    sm = emulator.client("sagemaker")
    return [len(sm.list_endpoints()["Endpoints"]), len(sm.list_endpoint_configs()["EndpointConfigs"]),
            len(sm.list_models()["Models"])]


def test_deploy_status_banner_and_delete_from_the_page(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path)
    assert any("No deployment yet" in i.value for i in at.info)
    at.multiselect(key="deploy_roles").set_value(["voice", "image"])
    at.text_input(key="deploy_bucket").input("omni-studio-page-test")
    at.run()
    assert "python -m infra deploy voice image" in _codes(at) and "--bucket omni-studio-page-test" in _codes(at)
    _button(at, "deploy_go").click().run()
    _ok(at)
    _until(at, lambda: "deploy — done" in " ".join(m.value for m in at.markdown), timeout=90)
    codes = _codes(at)
    assert "voice: omni-studio-" in codes and "InService" in codes and "smoke ok" in codes
    assert any(s.value.startswith("all endpoints InService, smoke test passed") for s in at.success)
    table = at.dataframe[0].value
    assert list(table["endpoint"]) == ["voice", "image"] and set(table["status"]) == {"InService"}
    assert set(table["smoke test"]) == {"ok"} and all(v.startswith("$") for v in table["$/hour"])
    # the money in view: right after the status, before the long names that pushed it off the right edge; the
    # emulator's dollars say so
    so_far = "cost so far (emulated)"
    assert list(table.columns)[:5] == ["endpoint", "status", "$/hour", so_far, "pool $/hour (min–max)"]
    assert [m.label for m in at.metric] == ["Per hour", "Per day", "Cost so far (emulated)"]
    # one cost so far on the screen: the banner's, the total's and the rows' (which add up to it)
    total = next(m.value for m in at.metric if m.label == "Cost so far (emulated)")
    banner = next(_text(w.value) for w in at.warning if "studio endpoints running" in w.value)
    assert f"{total} so far (emulated)" in banner, (total, banner)
    parts = [float(v.lstrip("$")) for v in table[so_far] if v != "—"]
    assert parts and sum(parts) == pytest.approx(float(total.lstrip("$").replace(",", "")), abs=1e-9)
    at.run()  # the next refresh: the sidebar's health says what runs now (not the cached "Creating")
    assert any("voice InService · image InService" in s.value for s in at.sidebar.success), \
        [e.value for e in at.sidebar.error]

    # Every page shows the banner while studio endpoints run.
    image_page = _open(monkeypatch, tmp_path, "pages/image.py")
    banner = [w.value for w in image_page.warning if "studio endpoints running" in w.value]
    assert banner and "$" in banner[0] and "/hour" in banner[0]

    at = _open(monkeypatch, tmp_path)
    _button(at, "delete_ask").click().run()
    warning = next(w.value for w in at.warning if "This deletes" in w.value)
    listed = " ".join(m.value for m in at.markdown)
    assert "endpoint `omni-studio-" in listed and "endpoint config" in listed and "model" in listed
    # two endpoints' endpoint/config/model, and what the lifecycle added: their schedules and rollback alarms,
    # the schedule group and the TTL role deploy made
    assert "schedule group" in listed and "alarm" in listed and "schedule `" in listed and "iam role" in listed
    n = int(re.search(r"This deletes (\d+) resources", warning).group(1))  # type: ignore[union-attr]
    plan_block = next(m.value for m in at.markdown if "endpoint config" in m.value)
    assert n == len(plan_block.splitlines()) and n >= 6 + 2 + 2 + 2, (n, plan_block)
    _button(at, "delete_go").click().run()
    _until(at, lambda: "delete — done" in " ".join(m.value for m in at.markdown), timeout=60)
    assert any("everything is gone" in s.value for s in at.success)
    log = next(str(c.value) for c in at.code if ": deleted" in str(c.value))
    gone = re.findall(r"((?:endpoint config|endpoint|model|alarm|schedule group|schedule|iam role) \S+): "
                      r"(?:deleted|already gone)", log)
    assert len(gone) == n and len(set(gone)) == n, log  # each resource once (not progress + summary)
    waits = [line for line in log.splitlines() if "Deleting (" in line]
    assert len(waits) == len({w.split(" Deleting")[0] for w in waits}), log  # a wait is one line, updated
    assert _listing(emulator_env) == [0, 0, 0] and not (tmp_path / "state.json").exists()
    assert any("No deployment yet" in i.value for i in at.info)
    at.run()  # the sidebar after a delete: calm, no error naming environment variables
    assert not at.sidebar.error, [e.value for e in at.sidebar.error]
    assert any("no deployment — deploy one on the Endpoints page" in i.value for i in at.sidebar.info)


def test_a_refused_deploy_says_why_and_creates_nothing(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    emulator_env.configure(quotas={"ml.g6.xlarge": 0, "ml.g6e.xlarge": 0, "ml.g5.xlarge": 0, "ml.g4dn.xlarge": 0})
    at = _open(monkeypatch, tmp_path)
    _button(at, "deploy_go").click().run()
    _until(at, lambda: "deploy — failed" in " ".join(m.value for m in at.markdown))
    assert any("quota" in e.value.lower() for e in at.error)
    assert _listing(emulator_env) == [0, 0, 0]


def test_an_action_while_another_command_writes_the_state_file_is_refused_with_a_message(
        emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    from infra.lock import StateLock

    at = _open(monkeypatch, tmp_path)
    at.multiselect(key="deploy_roles").set_value(["voice"])
    at.run()
    lock = StateLock(tmp_path / "state.json", "python -m infra delete").acquire()  # a CLI delete, say
    try:
        _button(at, "deploy_go").click().run()
        _ok(at)
        held = f"held by `python -m infra delete` (pid {os.getpid()}, since "
        assert any(held in _text(e.value) for e in at.error), [e.value for e in at.error]
        assert _listing(emulator_env) == [0, 0, 0] and not (tmp_path / "state.json").exists()
    finally:
        lock.release()
    _button(at, "deploy_go").click().run()
    _until(at, lambda: "deploy — done" in " ".join(m.value for m in at.markdown), timeout=90)

    lock = StateLock(tmp_path / "state.json", "python -m infra upgrade").acquire()
    try:
        for key in ("resume_go", "smoke_go"):  # these raised out of the page before
            _button(at, key).click().run()
            _ok(at)
            assert any("held by `python -m infra upgrade`" in _text(e.value) for e in at.error), key
        _button(at, "delete_ask").click().run()
        _button(at, "delete_go").click().run()
        _ok(at)
        assert any("held by `python -m infra upgrade`" in _text(e.value) for e in at.error)
        assert _listing(emulator_env) == [1, 1, 1]
    finally:
        lock.release()
    _button(at, "delete_ask").click().run()
    _button(at, "delete_go").click().run()
    _until(at, lambda: "delete — done" in " ".join(m.value for m in at.markdown), timeout=60)
    assert _listing(emulator_env) == [0, 0, 0]


def test_no_banner_and_no_aws_calls_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "offline")
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp_path / "none.json"))
    from services.settings import load_settings
    from ui.resources import banner_wanted

    s = load_settings()
    assert not banner_wanted(s, "offline") and banner_wanted(s, "sagemaker")
    assert not banner_wanted(s.with_overrides(cost_banner="off"), "sagemaker")


def test_the_voice_model_is_chosen_on_the_form_and_shown_in_the_status(
        emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import json

    from infra import DEFAULT_VOICE_MODEL
    from protocol.speech import VOICE_MODELS

    base = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
    at = _open(monkeypatch, tmp_path)
    picker = at.selectbox(key="deploy_voice_model")
    assert picker.value == DEFAULT_VOICE_MODEL and len(picker.options) == len(VOICE_MODELS)
    assert [o.split(":")[0] for o in picker.options] == list(VOICE_MODELS)
    assert [o for o in picker.options if o.endswith("[default]")] == [picker.options[list(VOICE_MODELS).index(
        DEFAULT_VOICE_MODEL)]]
    assert any("Base (cloning" in o for o in picker.options) and any("VoiceDesign (" in o for o in picker.options)
    assert "--voice-model" not in _codes(at)  # the published default needs no flag
    picker.set_value(base).run()
    assert f"--voice-model {base}" in _codes(at)
    at.multiselect(key="deploy_roles").set_value(["image"]).run()
    assert not [s for s in at.selectbox if s.key == "deploy_voice_model"]  # no voice endpoint: no voice model
    assert "--voice-model" not in _codes(at)
    at.multiselect(key="deploy_roles").set_value(["voice"]).run()
    assert at.selectbox(key="deploy_voice_model").value == base  # the choice was kept
    assert "python -m infra deploy voice " in _codes(at) and f"--voice-model {base}" in _codes(at)

    _button(at, "deploy_go").click().run()
    _ok(at)
    _until(at, lambda: "deploy — done" in " ".join(m.value for m in at.markdown), timeout=90)
    assert f"--voice-model {base}" in _codes(at)  # the action's own CLI line
    assert json.loads((tmp_path / "state.json").read_text())["voice_model"] == base
    table = at.dataframe[0].value
    assert list(table["endpoint"]) == ["voice"] and list(table["model"]) == [base]
    assert list(table["can do"]) == ["Base"] and list(table["smoke test"]) == ["ok"]
    assert any(f"Voice model {base}" in c.value.replace("\\", "") and "cloning a voice" in c.value for c in at.caption)


def test_time_to_live_instances_and_extend_on_the_page(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from infra.ttl import parse_at

    at = _open(monkeypatch, tmp_path)
    at.multiselect(key="deploy_roles").set_value(["voice"])
    at.text_input(key="deploy_ttl").input("2h")
    at.number_input(key="deploy_max_instances").set_value(2)
    at.run()
    assert "--ttl 2h" in _codes(at) and "--max-instances 2" in _codes(at)
    _button(at, "deploy_go").click().run()
    _until(at, lambda: "deploy — done" in " ".join(m.value for m in at.markdown), timeout=90)
    table = at.dataframe[0].value
    assert list(table["instances"]) == ["1 [1–2]"]
    assert list(table["time to live"])[0] in ("deletes itself in 1 h 59 min", "deletes itself in 2 h")
    assert any("TTL: the endpoints delete themselves at" in i.value for i in at.info)
    image_page = _open(monkeypatch, tmp_path, "pages/image.py")
    assert any("deletes itself in 1 h 59 min" in w.value or "deletes itself in 2 h" in w.value
               for w in image_page.warning), [w.value for w in image_page.warning]

    at = _open(monkeypatch, tmp_path)
    at.text_input(key="extend_ttl").input("0h").run()
    _button(at, "extend_go").click().run()
    assert any("is zero" in e.value for e in at.error) and "extend" not in " ".join(m.value for m in at.markdown)
    at.text_input(key="extend_ttl").input("5h").run()
    assert "python -m infra extend --ttl 5h" in _codes(at)
    before = datetime.now(UTC)
    _button(at, "extend_go").click().run()
    _until(at, lambda: "extend — done" in " ".join(m.value for m in at.markdown))
    state = __import__("json").loads((tmp_path / "state.json").read_text())
    got = emulator_env.client("scheduler").get_schedule(Name=state["endpoint_names"]["voice"],
                                                        GroupName=state["ttl"]["schedule_group"])
    moved = parse_at(got["ScheduleExpression"]) - before
    assert timedelta(hours=5) - timedelta(seconds=5) <= moved <= timedelta(hours=5, seconds=30)
    at.run()
    assert list(at.dataframe[0].value["time to live"])[0] in ("deletes itself in 4 h 59 min", "deletes itself in 5 h")
    _button(at, "delete_ask").click().run()
    _button(at, "delete_go").click().run()
    _until(at, lambda: "delete — done" in " ".join(m.value for m in at.markdown), timeout=60)
    assert _listing(emulator_env) == [0, 0, 0]


def test_the_banner_says_when_endpoints_delete_themselves_or_that_they_never_will() -> None:
    from datetime import UTC, datetime, timedelta

    from infra.ttl_choice import iso
    from ui.resources import ttl_text

    soon = iso(datetime.now(UTC) + timedelta(hours=2, minutes=10, seconds=30))
    assert ttl_text({"soonest_deletion": soon, "without_ttl": 0}) == "; deletes itself in 2 h 10 min"
    assert ttl_text({"soonest_deletion": soon, "without_ttl": 1}) == "; **no TTL** on 1: runs until deleted"
    assert ttl_text({"soonest_deletion": None, "without_ttl": 0}) == ""


def test_a_smoke_test_that_would_scale_an_idle_endpoint_up_asks_first(
        emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    """The video endpoint idles at 0 instances: the banner names it beside the running ones, and "Run smoke test"
    names the instance, its price and the wait before it scales it up (the CLI says the same)."""
    from infra.cli import _say_scale_up

    at = _open(monkeypatch, tmp_path)
    at.multiselect(key="deploy_roles").set_value(["voice", "video"])
    at.text_input(key="deploy_bucket").input("omni-studio-smoke-ask")
    at.checkbox(key="deploy_smoke").uncheck()
    at.run()
    _button(at, "deploy_go").click().run()
    _until(at, lambda: "deploy — done" in " ".join(m.value for m in at.markdown), timeout=90)
    emulator_env.advance_clock(20 * 60)  # 20 idle minutes: autoscaling takes video to 0 instances
    _until(at, lambda: list(at.dataframe[0].value["instances"])[1].startswith("0"), timeout=30)

    image_page = _open(monkeypatch, tmp_path, "pages/image.py")
    banner = [w.value for w in image_page.warning if "studio endpoints" in w.value]
    assert banner and "2 studio endpoints**: 1 running, video at 0 instances" in banner[0], banner

    at = _open(monkeypatch, tmp_path)
    _button(at, "smoke_go").click().run()
    _ok(at)
    ask = next(w.value for w in at.warning if "runs 0 instances" in w.value).replace("\\", "")
    assert "video endpoint" in ask and "/hour" in ask and "about 10 minutes" in ask, ask
    assert "smoke —" not in " ".join(m.value for m in at.markdown)  # nothing started before the yes
    _button(at, "smoke_cancel").click().run()
    assert not [w for w in at.warning if "runs 0 instances" in w.value]
    assert "smoke —" not in " ".join(m.value for m in at.markdown)

    _say_scale_up(tmp_path / "state.json", [])  # the CLI's note, from the same status
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert said and said[0].startswith("note: The video endpoint") and "about 10 minutes" in said[0], said
    _say_scale_up(tmp_path / "state.json", ["voice"])  # voice has its instance: nothing to say
    assert "note:" not in capsys.readouterr().err

    _button(at, "smoke_go").click().run()
    _button(at, "smoke_confirm").click().run()
    _ok(at)
    assert "smoke — running" in " ".join(m.value for m in at.markdown)
    video = __import__("json").loads((tmp_path / "state.json").read_text())["endpoint_names"]["video"]
    _until(at, lambda: emulator_env.lifecycle()["load"].get(video, {}).get("backlog"))  # its job waits
    emulator_env.advance_clock(120)  # the no-capacity alarm's two periods, then the instance (480 s)
    emulator_env.advance_clock(480)
    _until(at, lambda: "smoke — done" in " ".join(m.value for m in at.markdown), timeout=120)
    _button(at, "delete_ask").click().run()
    _button(at, "delete_go").click().run()
    _until(at, lambda: "delete — done" in " ".join(m.value for m in at.markdown), timeout=60)


def test_an_omni_deployment_on_the_page_smoke_tested_with_a_spoken_turn(
        emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The opt-in omni family deployed from the page: its smoke check (a one-turn native conversation with the
    offline engine as its container) in the action's log and the table, its model and GPU need, and totals that
    say they leave out its instance type (the shipped table has no price for the multi-GPU types)."""
    at = _open(monkeypatch, tmp_path)
    at.multiselect(key="deploy_roles").set_value(["omni"]).run()
    assert "python -m infra deploy omni " in _codes(at)
    assert any("omni: Qwen/Qwen3-Omni-30B-A3B-Instruct" in _text(c.value) and "85" in c.value for c in at.caption)
    _button(at, "deploy_go").click().run()
    _ok(at)
    _until(at, lambda: "deploy — done" in " ".join(m.value for m in at.markdown), timeout=120)
    log = _codes(at)
    assert "omni: smoke ok — one turn from the offline engine's voice: heard " in log, log
    table = at.dataframe[0].value
    assert list(table["endpoint"]) == ["omni"] and list(table["status"]) == ["InService"]
    assert list(table["smoke test"]) == ["ok"] and list(table["model"]) == ["Qwen/Qwen3-Omni-30B-A3B-Instruct"]
    assert list(table["instance"]) == ["ml.g6e.12xlarge"] and list(table["$/hour"]) == ["—"]
    assert list(table["pool $/hour (min–max)"]) == ["no price"]
    left_out = [w.value for w in at.warning if "leave out" in w.value]
    assert left_out and "ml.g6e.12xlarge" in _text(left_out[0]) and "--refresh-prices" in left_out[0]

    image_page = _open(monkeypatch, tmp_path, "pages/image.py")
    banner = [_text(w.value) for w in image_page.warning if "studio endpoint" in w.value]
    assert banner and "(without ml.g6e.12xlarge: no price)" in banner[0], banner

    at = _open(monkeypatch, tmp_path)
    _button(at, "delete_ask").click().run()
    _button(at, "delete_go").click().run()
    _until(at, lambda: "delete — done" in " ".join(m.value for m in at.markdown), timeout=60)
    assert _listing(emulator_env) == [0, 0, 0]
