"""The emulator's InvokeEndpointWithResponseStream, driven by boto3's real `sagemaker-runtime` client.

The endpoint's container is a real streaming chat server on loopback (the emulator's `containers` config plays
an image by it), which holds its answer back after the first piece until the test has received that piece as a
`PayloadPart`: a response the emulator buffered could never arrive, so the test proves the stream without
measuring time. Errors: a missing endpoint (ValidationError), a route the container does not serve and a
container that cannot be reached (ModelError), a container that breaks off mid-answer (ModelStreamError).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import botocore.exceptions as bx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from tests.chat_support import serving_app

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import IMAGE_URI, EmulatorHandle, deploy_endpoint  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

CHAT_IMAGE = IMAGE_URI.replace(":omni-", ":chat-")
ROUTE = "route=/v1/chat/completions"
HELD_S = 20.0  # how long the gated container holds its answer for the test (a buffered response never comes)
FIRST = 'data: {"choices": [{"index": 0, "delta": {"content": "Hello"}}]}\n\n'
REST = ['data: {"choices": [{"index": 0, "de', 'lta": {"content": " there"}}]}\n\n', "data: [DONE]\n\n"]


class Gate:
    """A container whose answer waits after its first piece until `release()` (or HELD_S, then says so)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.seen: list[dict] = []
        self.app = FastAPI()

        @self.app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        @self.app.post("/v1/chat/completions")
        async def chat(request: Request) -> StreamingResponse:
            self.seen.append(await request.json())
            return StreamingResponse(self._events(), media_type="text/event-stream")

        @self.app.post("/v1/broken")
        async def broken() -> StreamingResponse:
            async def events():  # type: ignore[no-untyped-def]
                yield FIRST
                raise RuntimeError("the model server fell over mid-answer")

            return StreamingResponse(events(), media_type="text/event-stream")

    async def _events(self):  # type: ignore[no-untyped-def]
        yield FIRST
        for _ in range(int(HELD_S / 0.02)):
            if self.released.is_set():
                break
            await asyncio.sleep(0.02)
        else:
            yield "data: NEVER RELEASED\n\n"
        for piece in REST:
            yield piece
            await asyncio.sleep(0.01)


@pytest.fixture()
def gate() -> Iterator[tuple[Gate, str]]:
    g = Gate()
    with serving_app(g.app) as url:
        yield g, url


def _chat_endpoint(emulator: EmulatorHandle, url: str, name: str = "chat-stream") -> str:
    emulator.configure(containers={":chat-": url})
    deploy_endpoint(emulator, name, image=CHAT_IMAGE, environment={"SM_VLLM_MODEL": "peer/chat-model"})
    return name


def _invoke(emulator: EmulatorHandle, endpoint: str, route: str = ROUTE) -> dict:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True})
    return emulator.client("sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName=endpoint, Body=body, ContentType="application/json", CustomAttributes=route)


def test_the_containers_answer_arrives_as_a_stream_of_payload_parts(emulator: EmulatorHandle,
                                                                   gate: tuple[Gate, str]) -> None:
    g, url = gate
    endpoint = _chat_endpoint(emulator, url)
    resp = _invoke(emulator, endpoint)
    assert resp["ContentType"].startswith("text/event-stream")
    assert resp["InvokedProductionVariant"] == "AllTraffic"
    parts = []
    for event in resp["Body"]:
        parts.append(event["PayloadPart"]["Bytes"])
        g.released.set()  # the first part came while the container still held the rest back
    text = b"".join(parts).decode()
    assert text == FIRST + "".join(REST)  # nothing lost, nothing added, in order; never "NEVER RELEASED"
    assert len(parts) >= 2 and parts[0] == FIRST.encode()
    assert g.seen == [{"messages": [{"role": "user", "content": "hi"}], "stream": True}]  # the body went through


def test_a_missing_endpoint_is_a_validation_error(emulator: EmulatorHandle) -> None:
    with pytest.raises(bx.ClientError) as info:
        _invoke(emulator, "never-created")
    err = info.value.response["Error"]
    assert err["Code"] == "ValidationError"
    assert err["Message"] == f"Endpoint never-created of account {emulator.account_id} not found."


def test_a_route_the_container_lacks_and_a_container_gone_are_model_errors(emulator: EmulatorHandle,
                                                                          gate: tuple[Gate, str]) -> None:
    _, url = gate
    endpoint = _chat_endpoint(emulator, url)
    with pytest.raises(bx.ClientError) as lacking:
        _invoke(emulator, endpoint, route="route=/v1/no/such/route")
    assert lacking.value.response["Error"]["Code"] == "ModelError"
    assert lacking.value.response["OriginalStatusCode"] == 404
    emulator.configure(containers={":chat-": "http://127.0.0.1:9"})  # the container went away
    with pytest.raises(bx.ClientError) as gone:
        _invoke(emulator, endpoint)
    assert gone.value.response["Error"]["Code"] == "ModelError"
    assert "Could not reach container primary" in gone.value.response["Error"]["Message"]


def test_a_container_breaking_off_ends_the_stream_with_model_stream_error(emulator: EmulatorHandle,
                                                                         gate: tuple[Gate, str]) -> None:
    _, url = gate
    endpoint = _chat_endpoint(emulator, url)
    resp = _invoke(emulator, endpoint, route="route=/v1/broken")
    got = []
    with pytest.raises(bx.EventStreamError) as info:
        for event in resp["Body"]:
            got.append(event["PayloadPart"]["Bytes"])
    assert b"".join(got) == FIRST.encode()  # what came before the break is delivered
    assert info.value.response["Error"]["Code"] == "ModelStreamError"  # boto3 keeps Code and Message only
    assert info.value.response["Error"]["Message"].startswith("The model container's response stream broke off")


def test_other_images_are_still_played_by_the_engine(emulator: EmulatorHandle, gate: tuple[Gate, str]) -> None:
    """The containers config plays the chat image only: an endpoint on the default image reaches the offline
    engine, which has no chat route (its own 404)."""
    _, url = gate
    emulator.configure(containers={":chat-": url})
    deploy_endpoint(emulator, "engine-stream")
    with pytest.raises(bx.ClientError) as info:
        _invoke(emulator, "engine-stream")
    assert info.value.response["Error"]["Code"] == "ModelError"
    assert info.value.response["OriginalStatusCode"] == 404
