"""Converse's reply stage aims the studio's server only where the closed set of targets says (services/targets.py,
docs/team.md "Threat model"): a creator picks a registered server (or the deployment's chat endpoint), never types
an address; a demo visitor gets the script; a forged widget value falls back to the set; and the services check the
Setup again before any reply stage is built — for the recorded turns, Compare's B and the live call. A real listener
on 127.0.0.1 stands for the internal service a hostile tester aimed the studio at: it must receive nothing. A reply
server's error is its status and a short plain excerpt, never its raw body. The command line refuses a reply URL
that is not http(s) with exit 2 before any work. Native mode against a session that never answers says what
happened."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from protocol.errors import BackendUnreachable, InvalidInput, StreamError
from services.access import Forbidden, Principal
from services.aws import AwsSession
from services.converse.native import Native
from services.converse.setup import Setup
from services.history import History
from services.settings import DemoMode, Settings
from services.targets import TargetBook, TargetGuard
from tests.chat_support import chat_app, serving_app
from tests.loopback_support import InternalService, internal_service, ws_serving
from tests.test_converse_page import _talk, turn_wav, webrtc_inert  # noqa: F401  (fixtures; webrtc_inert autouse)
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
BOB = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
ANN = Principal(id="ann@example.com", name="Ann", role="admin", signed_in=True)
ANSWER = "We open at nine, every day of the week."


class _Internal(InternalService):
    """The internal service, naming a model at /v1/models (so a reply would go on to chat)."""

    def reply(self, path: str) -> tuple[int, str, str]:
        if path == "/v1/models":
            return 200, "application/json", json.dumps({"data": [{"id": "internal/model"}]})
        return type(self).answer


@pytest.fixture
def internal() -> Iterator[tuple[str, type[_Internal]]]:
    with internal_service(_Internal) as served:
        yield served


@pytest.fixture
def chat_peer() -> Iterator[tuple[str, list[dict]]]:
    app, seen = chat_app(ANSWER)
    with serving_app(app) as url:
        yield url, seen


def _open(monkeypatch: pytest.MonkeyPatch, data: Path, url: str, *, servers: list[str] = (),
          demo: dict | None = None, actor: Principal | None = None, state: dict | None = None) -> AppTest:
    """The Converse page on the server at `url` (the sidebar's), with `servers` registered in the settings; as
    `actor` (without sign-in: LOCAL, an admin); in a demo when `demo`; `state`: the session's values before its
    first run (a forged widget message)."""
    from ui import auth

    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    monkeypatch.setenv("OMNI_STUDIO_SERVERS", json.dumps([{"url": s} for s in servers]))
    if demo is None:
        monkeypatch.delenv("OMNI_STUDIO_DEMO", raising=False)
    else:
        monkeypatch.setenv("OMNI_STUDIO_DEMO", json.dumps(demo))
    if actor is not None:
        monkeypatch.setattr(auth, "guard", lambda policy: actor)
        monkeypatch.setattr(auth, "principal", lambda: actor)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "pages" / "converse.py"), default_timeout=120)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    return at


def _live_reply(at: AppTest):  # type: ignore[no-untyped-def]
    """The live call's conversation as the page's microphone would begin it (its first frame): its reply stage,
    the call ended at once (no sound: nothing is heard, nothing answered)."""
    live = at.session_state["converse_microphone"].factory()
    try:
        return live.runner.reply
    finally:
        live.stop()
        live.cancel()


def test_a_creator_picks_the_reply_from_the_closed_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       engine_url: str, turn_wav: bytes, internal,  # noqa: F811
                                                       chat_peer) -> None:
    internal_url, handler = internal
    chat_url, chat_seen = chat_peer
    at = _open(monkeypatch, tmp_path / "data", engine_url, servers=[chat_url], actor=BOB)
    # A forged widget value (the internal service; `?` would turn the appended path into a query) falls back to
    # the set: the recorded turns, Compare's B and the live call go to registered servers only.
    at.session_state["converse_reply_target"] = f"server:{internal_url}/html500?"
    at.session_state["cmp_reply_target"] = f"server:{internal_url}"
    at.radio(key="converse_reply_kind").set_value("chat").run()
    at.radio(key="cmp_reply_kind").set_value("chat").run()
    assert not at.text_input  # nothing to type an address into
    assert at.selectbox(key="converse_reply_target").options == [f"{u.removeprefix('http://')} ({u})"
                                                                  for u in (engine_url, chat_url)]
    assert at.selectbox(key="converse_reply_target").value == f"server:{engine_url}"
    assert at.selectbox(key="cmp_reply_target").value == f"server:{engine_url}"
    assert _live_reply(at).url == engine_url
    at.selectbox(key="converse_reply_target").set_value(f"server:{chat_url}").run()
    assert _live_reply(at).url == chat_url
    _talk(at, turn_wav)
    assert not at.error, [e.value for e in at.error]
    [kept] = History(tmp_path / "data").conversations.list()
    assert kept.timeline["turns"][0]["reply_text"] == ANSWER and kept.settings["reply_url"] == chat_url
    assert len(chat_seen) == 1
    assert handler.seen == []  # nothing reached the internal service


def test_a_demo_visitor_gets_the_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str,
                                        turn_wav: bytes, internal) -> None:  # noqa: F811
    internal_url, handler = internal
    # Even a server the settings register is not a demo's: a demo stays on its own target, for everyone (here
    # LOCAL, an admin, without sign-in).
    at = _open(monkeypatch, tmp_path / "data", engine_url, servers=[internal_url], demo={"pages": ["converse"], "uploads": True})
    assert at.radio(key="converse_reply_kind").options == ["Scripted reply (rules you edit; not a model)"]
    assert at.radio(key="cmp_reply_kind").options == ["The same reply as A", "Another script (scripted, not a model)"]
    assert not at.text_input and not [s for s in at.selectbox if s.key in ("converse_reply_target", "cmp_reply_target")]
    forged = {"converse_reply_kind": "chat", "converse_reply_target": f"server:{internal_url}",
              "cmp_reply_kind": "chat", "cmp_reply_target": f"server:{internal_url}"}  # back to the script
    at = _open(monkeypatch, tmp_path / "data", engine_url, servers=[internal_url], demo={"pages": ["converse"], "uploads": True},
               state=forged)
    assert at.radio(key="converse_reply_kind").value == "script" and at.radio(key="cmp_reply_kind").value == "same"
    assert _live_reply(at).label.startswith("a scripted reply")
    _talk(at, turn_wav)
    [kept] = History(tmp_path / "data").conversations.list()
    assert kept.timeline["turns"][0]["reply_text"] == "We open at nine in the morning, every day."
    assert handler.seen == []


def test_the_services_check_the_reply_again(tmp_path: Path, internal) -> None:
    """What a page hands a service carries the person's guard: the reply is checked before any stage is built —
    the recorded turns' runner, Compare's B (changed) and the live call's runner."""
    internal_url, handler = internal
    settings = Settings(backend="server", server_url="http://127.0.0.1:9", data_dir=tmp_path / "data",
                        state_file=tmp_path / "no-state.json", chat_endpoints=["sm-chat"])
    book = TargetBook(settings, History(settings.data_dir))
    a = Setup(listen="http://127.0.0.1:9", speak="http://127.0.0.1:9", guard=TargetGuard(book, BOB))
    forged = Setup(listen="http://127.0.0.1:9", speak="http://127.0.0.1:9", script=None,
                   reply_url=f"{internal_url}/html500", guard=TargetGuard(book, BOB))
    for build in (forged.check, forged.runner, lambda: forged.live_runner(None),
                  lambda: a.changed(reply_url=internal_url)):
        with pytest.raises(Forbidden, match="the reply: .* is not a server registered in this studio"):
            build()
    with pytest.raises(InvalidInput, match=r"no \?query"):
        a.changed(reply_url=f"{internal_url}/html500?")
    aws = AwsSession("us-east-1")  # nothing is invoked: a stage is only built
    with pytest.raises(Forbidden, match="'someone-elses' is not this studio's chat endpoint"):
        a.changed(reply_endpoint="someone-elses", aws=aws)
    assert a.changed(reply_endpoint="sm-chat", aws=aws).reply_endpoint == "sm-chat"  # named by an admin: fine
    assert a.changed(reply_url="http://127.0.0.1:9").reply_url == "http://127.0.0.1:9"  # the registered server
    demo = TargetBook(settings.with_overrides(demo=DemoMode(pages=["converse"])), None)
    with pytest.raises(Forbidden, match="a demo studio stays on the target its settings name"):
        Setup(listen="x", speak="x", script=None, reply_url="http://127.0.0.1:9", guard=TargetGuard(demo, ANN)).check()
    assert demo.reply_options() == []
    assert handler.seen == []


def test_a_reply_error_is_its_status_and_a_plain_excerpt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         engine_url: str, turn_wav: bytes,  # noqa: F811
                                                         internal) -> None:
    """A registered server behind a proxy that answers with an internal page: the turn fails with the status, and
    its JSON error field (bounded, one line) when there is one — never the raw body."""
    internal_url, handler = internal
    at = _open(monkeypatch, tmp_path / "data", engine_url, servers=[internal_url], actor=BOB)
    at.radio(key="converse_reply_kind").set_value("chat").run()
    at.selectbox(key="converse_reply_target").set_value(f"server:{internal_url}").run()
    _talk(at, turn_wav)
    assert handler.seen == ["GET /v1/models", "POST /v1/chat/completions"]  # registered: the request went there
    shown = " ".join(e.value for e in at.error)
    assert f"{internal_url}/v1/chat/completions answered HTTP 500" in shown.replace("\\", "").replace("`", "")
    assert "hunter2" not in shown and "html" not in shown and "stack trace" not in shown
    # every turn failed: shown (with why), not kept
    assert "Every turn failed, so the conversation is not kept" in shown
    assert History(tmp_path / "data").conversations.list() == []
    timeline = at.session_state["converse_last"][0]
    assert "hunter2" not in json.dumps(timeline)

    handler.answer = (500, "application/json",
                      json.dumps({"error": {"message": "model overloaded " + "x" * 5000 + "\u0007"}}))
    _talk(at, turn_wav)
    error = at.session_state["converse_last"][0]["turns"][0]["error"]
    assert "answered HTTP 500: model overloaded xxx" in error and error.endswith("…")
    assert len(error) < 500 and "\u0007" not in error


def test_the_command_line_refuses_a_reply_url_that_is_not_http_before_any_work(tmp_path: Path, internal,
                                                                               turn_wav: bytes) -> None:  # noqa: F811
    """Refused before the turn is heard: the listen and speak targets (the listener) receive nothing."""
    internal_url, handler = internal
    turn = tmp_path / "turn1.wav"
    turn.write_bytes(turn_wav)
    for flags in (["--reply-url", "file:///etc/passwd"],
                  ["--reply-url", internal_url, "--compare", "reply-url=gopher://127.0.0.1:70/x"]):
        p = run_cli([sys.executable, "-m", "services", "converse", "--input", str(turn), "--listen-url",
                            internal_url, "--speak-url", internal_url, *flags], capture_output=True, text=True,
                           timeout=60, cwd=ROOT)
        assert p.returncode == 2, p.stderr
        assert "the reply URL is missing or not http(s)://" in p.stderr and flags[-1].split("=")[-1] in p.stderr
    assert handler.seen == []  # nothing was heard or sent


# -- native mode: a session that never answers ----------------------------------------------------------------------
@pytest.fixture
def silent_session() -> Iterator[str]:
    """A websockets server on loopback that accepts the session and never says a word."""

    async def handler(ws) -> None:  # type: ignore[no-untyped-def]
        async for _ in ws:
            pass

    with ws_serving(handler) as url:
        yield url


def test_a_session_that_never_answers_says_what_happened(silent_session: str) -> None:
    with pytest.raises(StreamError) as err:
        asyncio.run(Native(silent_session, open_timeout_s=1).run([]))
    assert str(err.value) == (f"ws://127.0.0.1:{silent_session.rsplit(':', 1)[1]}/v1/realtime?duplex=1 did not open a "
                              "speech-to-speech session (no session.updated within 1 s of session.update)")


def test_a_socket_that_never_answers_the_handshake_says_so() -> None:
    with socket.socket() as sock:  # accepts (the kernel's backlog) and never answers the WebSocket handshake
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        with pytest.raises(BackendUnreachable) as err:
            asyncio.run(Native(f"http://127.0.0.1:{port}", open_timeout_s=1).run([]))
    assert str(err.value) == (f"cannot reach the speech-to-speech session at ws://127.0.0.1:{port}/v1/realtime"
                              "?duplex=1 (the WebSocket handshake timed out after 1 s)")
