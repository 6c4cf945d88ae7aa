"""Shared fixtures: real local servers on free loopback ports, started once per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.engine import free_port, start_engine, wait_http_ok

__all__ = ["ROOT", "free_port", "wait_http_ok"]  # helpers the tests import from here

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def engine_url() -> Iterator[str]:
    """The offline engine as a real subprocess (`python -m offline`) on a free 127.0.0.1 port."""
    engine = start_engine()
    try:
        yield engine.url
    finally:
        engine.stop()
