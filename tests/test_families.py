"""The family registry (services/families): one module per catalog family, and a backend that builds a family's
client only when it is asked for."""

from __future__ import annotations

import sys
import subprocess

import pytest

from protocol import catalog
from protocol.errors import ConfigError
from services import families
from services.backend import server_backend
from services.settings import Settings


def test_every_catalog_family_has_its_module_in_catalog_order():
    assert tuple(families.REGISTRY) == catalog.FAMILY_NAMES
    for name, code in families.REGISTRY.items():
        assert code.name == name
    with pytest.raises(KeyError, match="no model family 'nope'"):
        families.code("nope")


def test_a_backend_builds_only_what_is_used(tmp_path):
    # nothing is reached: building a client opens no connection
    backend = server_backend("http://127.0.0.1:9", Settings.model_validate({"data_dir": str(tmp_path)}))
    assert backend.built() == ()
    listener = backend.client("listen")
    assert backend.built() == ("listen",) and backend.client("listen") is listener  # built once
    with pytest.raises(ConfigError, match="no family has a client called 'speech'"):
        backend.client("speech")


def test_transcribing_imports_no_other_familys_client():
    # A fresh process: asking for the listener must not import the image and video clients. (The speech package is
    # imported: the listener decodes recordings with services.speech.reference, and the package loads whole.)
    code = ("import sys; from services.backend import server_backend; from services.settings import Settings;"
            "server_backend('http://127.0.0.1:9', Settings()).client('listen');"
            "print(sorted(m for m in ('services.images', 'services.videos') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
