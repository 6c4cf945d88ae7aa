"""The endpoints page's versions with Streamlit's AppTest (the real app.py navigation) against the emulator: the
version in use, an Upgrade from the page with its CLI line and progress, then Roll back, which is offered only
while there is a version to return to."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from infra.cli import main as infra_main
from infra.model import DeployOptions

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle  # noqa: E402

pytest_plugins = ["tests.emulator_support"]
ROOT = Path(__file__).resolve().parent.parent
LIFECYCLE_OFF = ["--no-ttl", "--no-scale-to-zero"] if "ttl" in DeployOptions.__dataclass_fields__ else []


def _run_until(at: AppTest, done, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        at.run()
        assert not at.exception, at.exception[0].message
        if done():
            return
        assert time.monotonic() < deadline, f"timed out; page shows: {[c.value for c in at.code]}"
        time.sleep(0.2)


def _text(at: AppTest) -> str:
    """The page's Markdown as read (the views escape Markdown's specials in what they show)."""
    return "\n".join(str(m.value) for m in at.markdown).replace("\\", "")


def _said(at: AppTest) -> list[str]:
    """The page's success lines as read (and its errors, to show in a failure)."""
    return [s.value.replace("\\", "") for s in at.success] + [f"error: {e.value}" for e in at.error]


def test_upgrade_and_roll_back_from_the_endpoints_page(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", emulator_env.s3_url)  # the rollback alarms, in moto
    state_file = tmp_path / "state.json"
    assert infra_main(["deploy", "image", "--state-file", str(state_file), "--role-arn", ROLE_ARN, "--no-smoke",
                       *LIFECYCLE_OFF, "--poll-seconds", "0.05", "--wait-timeout", "60"]) == 0
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(state_file))
    monkeypatch.setenv("OMNI_STUDIO_INFRA_POLL_S", "0.05")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "sagemaker")
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/endpoints.py")
    _run_until(at, lambda: "Versions" in [s.value for s in at.subheader])
    assert "image: v1 (omni-sagemaker-cuda-v1.6)" in _text(at)
    assert at.button(key="rollback_go").disabled  # nothing to return to yet
    assert any("No previous version to return to" in c.value for c in at.caption)

    at.text_input(key="upgrade_tag").input("omni-v1.7")
    at.checkbox(key="upgrade_smoke").uncheck()
    at.run()
    codes = "\n".join(str(c.value) for c in at.code)
    assert f"python -m infra upgrade --image-tag omni-v1.7 --state-file {state_file} --no-smoke" in codes
    at.button(key="upgrade_go").click()
    _run_until(at, lambda: "upgrade — done" in _text(at))
    assert "image: now on omni-v1.7" in _said(at), _said(at)
    assert "image: v1 -> v2 (omni-v1.7) in service by blue/green" in "\n".join(str(c.value) for c in at.code)
    _run_until(at, lambda: "image: v2 (omni-v1.7, blue/green, since " in _text(at))
    assert "v1 (omni-sagemaker-cuda-v1.6) kept for rollback" in _text(at)
    assert "Back to image v1 `omni-sagemaker-cuda-v1.6`" in _text(at)

    at.button(key="rollback_go").click()
    _run_until(at, lambda: "rollback — done" in _text(at), timeout=120)
    assert "image: back on the previous version" in _said(at), _said(at)
    _run_until(at, lambda: "image: v1 (omni-sagemaker-cuda-v1.6); v2 (omni-v1.7) rolled back" in _text(at))
    assert at.button(key="rollback_go").disabled
    assert infra_main(["delete", "--state-file", str(state_file), "--poll-seconds", "0.05"]) == 0
