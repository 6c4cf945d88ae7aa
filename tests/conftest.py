"""Shared fixtures: real local servers on free loopback ports, started once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from offline.launch import Engine, free_port, start_engine

__all__ = ["free_port"]  # the tests import it from here


@pytest.fixture(scope="session")
def offline_engine() -> Iterator[Engine]:
    """The offline engine as a real subprocess (`python -m offline`) on a free 127.0.0.1 port (its log and
    process are there for the tests that check what the engine did)."""
    engine = start_engine()
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def engine_url(offline_engine: Engine) -> str:
    return offline_engine.url
