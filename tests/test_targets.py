"""Targets are a closed set (services/targets.py): the studio's server sends requests only to the target the
settings name, the servers an admin registered and the deployment's endpoints — never to an address someone
typed into a Compare or Evaluations form. A real listener on 127.0.0.1 stands for the internal service a hostile
creator aimed the studio at: it must receive nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.common import error_text
from protocol.errors import InvalidInput, ServerError
from services.access import Forbidden, Principal
from services.addresses import check_server_url
from services.compare import ImageVariant, Target, VoiceVariant, compare_images, compare_voices
from services.eval.runner import run_items
from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History
from services.images import ImageRequest
from services.settings import DemoMode, Settings
from services.targets import TargetBook
from tests.loopback_support import InternalService, internal_service

BOB = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
ANN = Principal(id="ann@example.com", name="Ann", role="admin", signed_in=True)
SHELL = Principal(id="cli:ann", name="ann", role="admin")
SECRET = "db-password=hunter2 <internal stack trace>"


class _Listener(InternalService):
    """An internal service: records every request, answers 500 with a body nobody outside should read."""

    answer = (500, "text/html", f"<html><body>{SECRET}</body></html>")


@pytest.fixture
def listener() -> Iterator[tuple[str, type[_Listener]]]:
    with internal_service(_Listener) as served:
        yield served


@pytest.fixture
def settings(tmp_path: Path, engine_url: str) -> Settings:
    return Settings(backend="server", server_url=engine_url, data_dir=tmp_path / "data",
                    state_file=tmp_path / "no-state.json")


def _default(settings: Settings):
    from services.backend import create_backend

    return create_backend(settings)


# -- the URL rule -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url, problem", [
    ("ftp://gpu-box:8091", "must start with http:// or https://"),
    ("file:///etc/passwd", "must start with http://"),
    ("http://ann:pw@gpu-box:8091", "no user name or password"),
    ("http://@gpu-box", "no user name or password"),
    ("http://gpu-box:8091/admin/secret?q=", "no ?query"),
    ("http://gpu-box:8091/#x", "no ?query or #fragment"),
    ("http://gpu-box:8091/a/../admin", "plain segments"),
    ("http://gpu-box:8091/%2e%2e/admin", "plain segments"),
    ("http://gpu-box:99999", "port"),
    ("http:///nohost", "names a host"),
    ("http://gpu box:8091", "no spaces"),
])
def test_a_server_url_is_a_plain_base(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("?", r"\?").replace(".", r"\.").replace("/", "/")):
        check_server_url(url)


def test_a_server_url_is_normalised() -> None:
    assert check_server_url(" http://GPU-box:8091/ ") == "http://gpu-box:8091"
    assert check_server_url("ws://gpu-box:8091") == "http://gpu-box:8091"  # the clients derive ws:// themselves
    assert check_server_url("wss://omni.example.com/omni/") == "https://omni.example.com/omni"
    assert check_server_url("http://[::1]:8091") == "http://[::1]:8091"


# -- the closed set ---------------------------------------------------------------------------------------------
def test_only_an_admin_adds_a_server_and_everyone_picks_from_the_set(settings: Settings, tmp_path: Path, history_url: str | None) -> None:
    settings = settings.with_overrides(database_url=history_url)  # the servers table on both databases
    history = History.of(settings)
    book = TargetBook(settings, history)
    with pytest.raises(Forbidden, match="only an admin"):
        book.add_server(BOB, "http://gpu-box:8091")
    with pytest.raises(InvalidInput, match="no user name or password"):
        book.add_server(ANN, "http://ann:pw@gpu-box:8091")
    server = book.add_server(ANN, "http://gpu-box:8091/", name="  GPU\nbox  ")
    assert (server.url, server.name, server.source) == ("http://gpu-box:8091", "GPU box", "added by ann@example.com")
    # Another process (another browser, a restart) sees it: it is kept in the history.
    again = TargetBook(settings, History.of(settings))
    assert [s.url for s in again.servers()] == [settings.server_url, "http://gpu-box:8091"]
    assert [o.key for o in again.options("image")] == ["default", f"server:{settings.server_url}",
                                                       "server:http://gpu-box:8091"]
    again.check(BOB, "server", url="http://gpu-box:8091/", modality="image")  # registered: fine
    with pytest.raises(Forbidden, match="not a server registered in this studio"):
        again.check(BOB, "server", url="http://other-box:8091", modality="image")
    # Admins register servers, and the command line acts as one: the services take any target from them (the
    # studio's pickers still offer only the set, to everyone).
    again.check(ANN, "server", url="http://other-box:8091", modality="image")
    again.check(SHELL, "server", url="http://other-box:8091", modality="image")
    book.remove_server(ANN, "http://gpu-box:8091")
    assert "http://gpu-box:8091" not in TargetBook(settings, History.of(settings)).server_urls()


def test_a_demo_never_leaves_its_target(settings: Settings) -> None:
    demo = settings.with_overrides(demo=DemoMode(pages=["image"]))
    book = TargetBook(demo, History(demo.data_dir))
    assert [o.key for o in book.options("image")] == ["default"]
    with pytest.raises(Forbidden, match="a demo studio stays on the target its settings name"):
        book.check(ANN, "server", url=demo.server_url, modality="image")


def test_sagemaker_targets_are_the_deployments_endpoints(settings: Settings) -> None:
    s = settings.with_overrides(image_endpoint="omni-image")
    book = TargetBook(s, None)
    assert book.endpoints("image") == ["omni-image"] and book.endpoints("video") == []
    book.check(BOB, "sagemaker", endpoint="omni-image", modality="image")
    with pytest.raises(Forbidden, match="'someone-elses' is not this studio's image endpoint"):
        book.check(BOB, "sagemaker", endpoint="someone-elses", modality="image")


def test_the_former_kind_omni_is_read_as_server_and_held_to_the_same_set(settings: Settings, listener) -> None:
    """A server's kind under its former name — Target("omni") from an older caller, an "omni:<url>" key from an
    older link, a SPEC's or a kept evaluation's backend "omni" — is today's "server", checked like it."""
    from services.targets import chosen, option_key_of, spec_keys, target_backend, target_overrides

    url, seen = listener
    assert Target("omni", url=settings.server_url) == Target("server", url=settings.server_url)
    assert spec_keys(Target("omni", url="http://h:1"), "offline", None) == {"backend": "server", "url": "http://h:1"}
    assert target_backend("omni") == "server" and target_backend(url="http://h:1") == "server"
    assert target_overrides("image", backend="omni", url="http://h:1") == {"backend": "server",
                                                                          "server_url": "http://h:1"}
    assert option_key_of("omni:http://h:1") == "server:http://h:1"
    assert option_key_of("sagemaker:omni-image") == "sagemaker:omni-image" and option_key_of("default") == "default"
    book = TargetBook(settings, History(settings.data_dir))
    assert chosen(book.options("image"), f"omni:{settings.server_url}").kind == "server"
    book.check_variant_keys(BOB, "image", [{"label": "A", "backend": "omni", "url": settings.server_url}])
    with pytest.raises(Forbidden, match="is not a server registered"):
        book.check_variant_keys(BOB, "image", [{"label": "B", "backend": "omni", "url": url}])
    assert seen.seen == []


# -- what the hostile tester did, end to end --------------------------------------------------------------------
def test_a_creator_cannot_aim_image_compare_at_an_internal_url(settings: Settings, listener) -> None:
    url, seen = listener
    history = History(settings.data_dir).acting_as(BOB)
    default = _default(settings)
    try:
        request = ImageRequest(prompt="a lighthouse", size="256x256", steps=1)
        variants = [ImageVariant("A", request),
                    ImageVariant("B", request, Target("server", url=f"{url}/admin/secret?q="))]
        with pytest.raises(InvalidInput, match="no \\?query"):
            compare_images(variants, settings=settings, history=history, default=default)
        variants[1] = ImageVariant("B", request, Target("server", url=f"{url}/admin/secret"))
        with pytest.raises(Forbidden, match="variant B: .* is not a server registered in this studio"):
            compare_images(variants, settings=settings, history=history, default=default)
        with pytest.raises(Forbidden, match="is not a server registered"):
            compare_voices([VoiceVariant("A", "Hello."), VoiceVariant("B", "Hello.", target=Target("server", url=url))],
                           settings=settings, default=default, actor=BOB)
    finally:
        default.close()
    assert seen.seen == []  # nothing reached the internal service
    assert History(settings.data_dir).jobs.list() == []  # and nothing was generated


def test_an_evaluation_cannot_read_a_state_file_or_reach_an_unregistered_url(settings: Settings, listener,
                                                                            tmp_path: Path) -> None:
    url, seen = listener
    store = EvalStore(History(settings.data_dir).acting_as(BOB))
    book = TargetBook(settings, store.history)

    def spec(**elsewhere: str):
        return parse_spec({"name": "e", "modality": "image", "prompts": ["a cat"],
                           "variants": [{"label": "A", "backend": "server", "url": settings.server_url, "steps": 1},
                                        {"label": "B", "steps": 2, **elsewhere}]})

    with pytest.raises(Forbidden, match="state_file point the studio elsewhere"):
        store.create(spec(state_file="/etc/passwd", backend="sagemaker"), targets=book)
    for key, value in (("profile", "prod"), ("region", "eu-west-1")):
        with pytest.raises(Forbidden, match=f"{key} point the studio elsewhere"):
            store.create(spec(**{key: value}), targets=book)
    with pytest.raises(Forbidden, match="is not a server registered"):
        store.create(spec(url=url), targets=book)
    # Made without the check (an older studio, a hand-edited row): running it refuses before anything is sent.
    ev = store.create(spec(url=f"{url}/admin"))
    with pytest.raises(Forbidden, match="variant 'B': .* is not a server registered"):
        run_items(store, ev.id, base=settings)
    assert seen.seen == []
    assert all(i.status == "pending" for i in store.items(ev.id))
    # An admin's SPEC (the command line: the shell user's own credentials and network) may name one as before.
    shell = EvalStore(History(settings.data_dir).acting_as(SHELL))
    shell.create(spec(state_file=str(tmp_path / "theirs.json"), backend="sagemaker"), targets=book)


def test_a_registered_servers_error_body_is_its_status_and_a_plain_excerpt(settings: Settings, listener) -> None:
    url, handler = listener
    history = History(settings.data_dir)
    TargetBook(settings, history).add_server(ANN, url)
    request = ImageRequest(prompt="a lighthouse", size="256x256", steps=1)
    default = _default(settings)
    try:
        outcome = compare_images([ImageVariant("A", request), ImageVariant("B", request, Target("server", url=url))],
                                 settings=settings, history=history.acting_as(BOB), default=default)[1]
        assert handler.seen == ["POST /v1/images/generations"]  # registered: the request went there
        assert "HTTP 500" in outcome.error and SECRET not in outcome.error and "<html>" not in outcome.error
        handler.answer = (500, "application/json", json.dumps({"error": {"message": "x" * 5000 + "\u0007"}}))
        outcome = compare_images([ImageVariant("A", request), ImageVariant("B", request, Target("server", url=url))],
                                 settings=settings, history=history.acting_as(BOB), default=default)[1]
        assert "HTTP 500" in outcome.error and "xxx" in outcome.error
        assert len(outcome.error) < 500 and "\u0007" not in outcome.error and outcome.error.endswith("…")
    finally:
        default.close()


def test_error_text_keeps_json_error_fields_only() -> None:
    assert error_text('{"error": {"message": "model not loaded"}}') == "model not loaded"
    assert error_text('{"detail": "Not Found"}') == "Not Found"
    assert error_text("Traceback (most recent call last):\n  File ...") == ""  # not JSON: the status alone
    assert error_text('["a list"]') == ""
    assert error_text('{"error": "line one\\nline two\\u0000"}') == "line one line two"
    assert len(error_text(json.dumps({"error": "y" * 10_000}))) == 300


def test_server_errors_of_the_voice_catalog_show_no_raw_body(listener) -> None:
    from services.speech.client import OmniCatalog

    url, handler = listener
    with pytest.raises(ServerError) as err:
        OmniCatalog(url).voices()
    assert "HTTP 500" in str(err.value) and SECRET not in str(err.value)
