"""The Endpoints page's "Add an endpoint" with Streamlit's AppTest (through app.py), against the local SageMaker
emulator: with a voice deployment, an admin is offered every other family of the catalog (the opt-in ones marked),
sees the `python -m infra add` line, confirms what it creates, and the action adds the sound endpoint with its
progress, smoke test and audit entry; the table then lists both and the form offers what is left. A creator is
refused the action before anything happens, and the refusal is in the audit log."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.actions import ActionRunner
from infra.cli import main as infra_main
from infra.progress import WaitSettings
from infra.state import DeploymentState
from protocol.catalog import FAMILIES
from services.access import Forbidden, Principal
from services.audit import AuditLog
from services.history import History
from tests.test_endpoints_page import _button, _codes, _ok, _open, _text, _until

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]


def _offered(deployed: set[str]) -> list[str]:
    """What the form should offer, read from the catalog: each family not deployed, the opt-in ones marked."""
    return [f"{f.icon} {f.title}" + (" (opt-in)" if f.opt_in else "") for f in FAMILIES if f.name not in deployed]


def _markdown(at) -> str:  # type: ignore[no-untyped-def]
    return " ".join(m.value for m in at.markdown)


def test_an_admin_adds_a_sound_endpoint_from_the_page(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_file = tmp_path / "state.json"
    assert infra_main(["deploy", "voice", "--no-smoke", "--state-file", str(state_file), "--role-arn", ROLE_ARN,
                       *CLI_FAST]) == 0
    capsys.readouterr()
    deployment = DeploymentState.load(state_file)
    at = _open(monkeypatch, tmp_path)
    picker = at.multiselect(key="add_families")
    assert list(picker.options) == _offered({"voice"})
    assert {"listen", "omni", "sound"} <= {f.name for f in FAMILIES if f.opt_in}  # the opt-in ones are offered too
    picker.set_value(["sound"]).run()
    _ok(at)
    assert f"python -m infra add sound --state-file {state_file}" in _codes(at)
    assert any("sound: Sound — Stable Audio Open" in c.value for c in at.caption)
    assert any("sound: stabilityai/stable-audio-open-1.0 — needs" in _text(c.value) for c in at.caption)

    _button(at, "add_ask").click().run()
    warning = next(_text(w.value) for w in at.warning if "This creates" in w.value)
    assert f"This creates sound in us-east-1 (`omni-studio-sound-{deployment.deployment_id}`)" in warning
    assert "TTL: the endpoints delete themselves at" in warning
    _button(at, "add_go").click().run()
    _ok(at)
    _until(at, lambda: "add — done" in _markdown(at), timeout=90)
    codes = _codes(at)
    assert "sound: adding to deployment" not in codes  # deployment-wide lines are the deployment's
    assert "deployment: adding to deployment" in codes and "sound: smoke ok" in codes and "voice: smoke" not in codes
    assert any(s.value.startswith("all endpoints InService, smoke test passed") for s in at.success)
    table = at.dataframe[0].value
    assert list(table["endpoint"]) == ["voice", "sound"] and set(table["status"]) == {"InService"}
    assert list(at.multiselect(key="add_families").options) == _offered({"voice", "sound"})
    audit = next(d.value for d in at.dataframe if "action" in d.value.columns)
    row = audit[audit["action"] == "add"].iloc[0]
    assert row["outcome"] == "ok" and row["who"] == "local (admin)"
    assert row["target"] == str(state_file)

    # delete from the page takes both
    _button(at, "delete_ask").click().run()
    listed = _markdown(at)
    assert f"omni-studio-sound-{deployment.deployment_id}" in listed and f"omni-studio-voice-{deployment.deployment_id}" in listed
    _button(at, "delete_go").click().run()
    _until(at, lambda: "delete — done" in _markdown(at), timeout=60)
    assert emulator_env.client("sagemaker").list_endpoints()["Endpoints"] == [] and not state_file.exists()


def test_a_creator_may_not_add_and_the_refusal_is_audited(tmp_path: Path) -> None:
    audit = AuditLog(History(tmp_path / "data"))
    runner = ActionRunner(tmp_path / "state.json", audit=audit)
    creator = Principal(id="bob@example.com", name="Bob", role="creator")
    with pytest.raises(Forbidden, match="Bob \\(creator\\) may not add an endpoint to a deployment: only an admin"):
        runner.add(["sound"], actor=creator, wait=WaitSettings(poll_s=0.05))
    assert runner.current() is None
    (entry,) = audit.entries()
    assert (entry.action, entry.outcome) == ("add", "refused")
    assert entry.detail["command"] == f"python -m infra add sound --state-file {tmp_path / 'state.json'}"
