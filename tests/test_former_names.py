"""A vLLM-Omni server was the backend kind "omni" until the Qwen3-Omni family took that word; it is "server" now.
What people and files said before is still read as today's name (services/kinds.py): here the history's kept
transcripts and the command line's --backend; the settings, SPECs, evaluations, load reports, compare targets and
option keys are proved beside their own tests (test_settings, test_eval, test_load, test_targets, test_demo)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from services.cli.common import common_options
from services.history import History
from services.kinds import BACKEND_NAMES, backend_name, kind


def test_the_kinds_and_the_former_name() -> None:
    assert BACKEND_NAMES == ("offline", "server", "sagemaker")
    assert backend_name("omni") == "server" and backend_name("sagemaker") == "sagemaker" and backend_name(None) is None
    assert kind("omni") == kind("server") and kind("server").label == "vLLM-Omni server"
    with pytest.raises(KeyError, match="one of offline, server, sagemaker"):
        kind("gpu")


def test_backend_omni_on_the_command_line_is_server() -> None:
    parser = argparse.ArgumentParser(parents=[common_options()])
    assert parser.parse_args(["--backend", "omni", "--url", "http://h:1"]).backend == "server"
    assert parser.parse_args(["--backend", "server"]).backend == "server"
    with pytest.raises(SystemExit):
        parser.parse_args(["--backend", "gpu"])


def test_a_transcript_kept_with_backend_omni_reads_as_server(tmp_path: Path) -> None:
    history = History(tmp_path / "data")
    history.transcripts.record("the harbour opens at nine", source="talk.wav", route="file", model="m",
                               backend="omni", target="http://gpu-box:8091")  # as a studio before the rename kept it
    kept, = history.transcripts.list()
    assert kept.backend == "server"
    assert history.transcripts.get(kept.id).backend == "server"
