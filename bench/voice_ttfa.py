"""Time to first audio: the studio's SpeechSession against a minimal raw `websockets` client.

Both talk to the same speech server with the same `session.config` and text, over a fresh connection
per run, in interleaved runs (ABBA order, so drift hits both alike). Each figure is measured the same
way from the caller's side: from just before the text is sent to the moment the first PCM chunk is in
the caller's hands (for the studio: yielded by `session.speak()`, after its parsing, statistics,
recording and queue hop). Both clients turn per-message deflate off (PCM does not compress).

    python bench/voice_ttfa.py [--backend offline|server|sagemaker] [--url URL] [--runs 15]

With `--backend sagemaker` the studio's SpeechSession over the SageMaker HTTP/2 bidirectional stream
(the local emulator over TLS, bridging to the same engine's WebSocket) joins the same interleaved runs,
twice: as it is now (session.config held for the first text, the text and input.done handed over with
it, one write; session.close and the end of input, one write; TCP_NODELAY on its connection) and as it
was (the config sent on its own at connect, one write per message, on its own connection with the CRT's
default Nagle). Each is measured on a connection that has been quiet for IDLE_S and right after another
session on the same connection (where, with Nagle, every small write waits for the server's delayed ACK
of the last one: the previous session's END_STREAM, the next stream's HEADERS and events). The figures
are ratios to the studio's direct WebSocket path: what the SageMaker hop costs the first audio.

Targets: studio median / raw median ≤ 1.05, and the studio adds ≤ 5 ms; HTTP/2 bidi / WebSocket ≤ 1.1. "Adds" is the median of the
paired differences (each studio run minus the raw run next to it), which cancels most of the engine's
run-to-run noise; the difference of the medians is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.kinds import backend_name  # noqa: E402  (--backend omni, the server's former name, is taken too)

# A short first clause keeps the engine's share (and its run-to-run noise) small next to the client's.
TEXT = ("Hello there, studio. Streaming speech should start while the rest is still being made. "
        "This paragraph has three sentences.")
TARGET_RATIO = 1.05
TARGET_ADDED_MS = 5.0
TARGET_BIDI_RATIO = 1.1
IDLE_S = 0.1  # a "quiet connection" run starts this long after the last: longer than a delayed ACK


async def raw_ttfa(ws_url: str, config: str, text: str) -> float:
    """A minimal client: config, text, input.done, wait for the first binary frame; then drain."""
    import websockets

    async with websockets.connect(ws_url, compression=None, max_size=None) as ws:
        await ws.send(config)
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "input.text", "text": text}))
        await ws.send(json.dumps({"type": "input.done"}))
        while not isinstance(await ws.recv(), bytes):
            pass
        ttfa = time.perf_counter() - t0
        while True:  # let the utterance finish so the next run starts on an idle server
            msg = await ws.recv()
            if isinstance(msg, str) and json.loads(msg).get("type") == "session.done":
                break
        return ttfa * 1000.0


class OneWriteEach:
    """A transport seen without `send_texts`: the session then writes every message on its own."""

    def __init__(self, transport) -> None:
        self._transport = transport
        self.target = transport.target

    async def connect(self) -> None:
        await self._transport.connect()

    async def send_text(self, message: str) -> None:
        await self._transport.send_text(message)

    async def receive(self):
        return await self._transport.receive()

    async def close(self) -> None:
        await self._transport.close()


class OldPattern:
    """The HTTP/2 client as it was: config at connect, one write per message, and its own connection whose
    socket keeps Nagle's algorithm (the CRT's default)."""

    def __init__(self, client) -> None:
        from services.speech.http2_clients import Http2Clients

        self.client = client
        model = client._transport_factory()
        self.clients = Http2Clients(model.aws, model.endpoint_uri)
        self.clients.tcp_no_delay = False

    def transport(self):
        from services.speech.sagemaker_http2 import Http2SpeechTransport

        model = self.client._transport_factory()
        return OneWriteEach(Http2SpeechTransport(
            model.aws, model.endpoint, path=model.path, endpoint_uri=model.endpoint_uri,
            connect_timeout=model.connect_timeout, receive_timeout=model.receive_timeout, clients=self.clients))

    async def keep_apart(self) -> None:
        """The new pattern's client must not set TCP_NODELAY on this connection's socket."""
        from services.speech.http2_clients import sockets_to

        new = self.client._transport_factory().clients
        new.leave_alone(sockets_to(await self.clients.peers()))


async def studio_ttfa(client, config, text: str, *, old: OldPattern | None = None) -> tuple[float, float]:
    """(caller-side ttfa, the session's own stats.ttfa_ms). `old`: the old write pattern and connection."""
    from services.speech import PcmChunk

    session = client.open(config)
    if old is not None:
        session.hold_config = False
        session.transport = old.transport()
    async with session:
        t0 = time.perf_counter()
        ttfa = None
        async for event in session.speak(text):
            if ttfa is None and isinstance(event, PcmChunk):
                ttfa = (time.perf_counter() - t0) * 1000.0
        assert ttfa is not None and session.stats.state == "done", session.stats
        return ttfa, session.stats.ttfa_ms or 0.0


def target_url(args: argparse.Namespace) -> tuple[str, object]:
    if args.backend == "server":
        if not args.url:
            sys.exit("--backend server needs --url, e.g. http://gpu-box:8091")
        return args.url.rstrip("/"), None
    from offline.launch import start_engine

    engine = start_engine()  # its own subprocess on a free loopback port
    return engine.url, engine


async def main_async(args: argparse.Namespace) -> dict:
    if args.backend != "sagemaker":
        url, engine = target_url(args)
        try:
            return await measure(args, url, None)
        finally:
            if engine is not None:
                engine.stop()
    from emulator.stack import sagemaker_stack
    from infra.model import ROLE_PROFILES
    from services.backend import create_backend
    from services.settings import load_settings

    with sagemaker_stack({"voice": ROLE_PROFILES["voice"].model_id}) as stack:
        bidi = create_backend(load_settings().with_overrides(**stack.settings)).client("voice")
        return await measure(args, stack.engine_url, bidi)


async def measure(args: argparse.Namespace, url: str, bidi) -> dict:
    from protocol.common import dumps
    from services.speech import omni_client, speech_config

    client = omni_client(url)
    voice = args.voice or client.voices()[0]
    config = speech_config(voice=voice, split_granularity=args.split)
    wire_config = dumps(config)
    ws_url = "ws://" + url.removeprefix("http://") + "/v1/audio/speech/stream"
    old = OldPattern(bidi) if bidi is not None else None
    if old is not None:  # its connection first, so the new pattern's client knows to leave its socket alone
        await studio_ttfa(bidi, config, TEXT, old=old)
        await old.keep_apart()
    for _ in range(2):  # warm-up: first connections, model caches
        await raw_ttfa(ws_url, wire_config, TEXT)
        await studio_ttfa(client, config, TEXT)
        if bidi is not None:
            await studio_ttfa(bidi, config, TEXT)
            await studio_ttfa(bidi, config, TEXT, old=old)
    raw, studio, own, over_bidi, over_bidi_old, back_to_back, old_back_to_back = [], [], [], [], [], [], []
    names = ["raw", "studio"] + (["bidi", "bidi_old", "bidi_again", "bidi_old_again"] if bidi is not None else [])
    for i in range(args.runs):
        for which in (names if i % 2 == 0 else names[::-1]):
            if which in ("bidi", "bidi_old"):
                await asyncio.sleep(IDLE_S)  # the connection has been quiet a while: no delayed ACK pending
            if which == "bidi_again":  # right after another session on the same HTTP/2 connection
                await studio_ttfa(bidi, config, TEXT)
                back_to_back.append((await studio_ttfa(bidi, config, TEXT))[0])
            elif which == "bidi_old_again":
                await studio_ttfa(bidi, config, TEXT, old=old)
                old_back_to_back.append((await studio_ttfa(bidi, config, TEXT, old=old))[0])
            elif which == "raw":
                raw.append(await raw_ttfa(ws_url, wire_config, TEXT))
            elif which == "studio":
                t, s = await studio_ttfa(client, config, TEXT)
                studio.append(t)
                own.append(s)
            elif which == "bidi":
                over_bidi.append((await studio_ttfa(bidi, config, TEXT))[0])
            else:
                over_bidi_old.append((await studio_ttfa(bidi, config, TEXT, old=old))[0])
    r, s = statistics.median(raw), statistics.median(studio)
    extra = {}
    if over_bidi:
        b, old = statistics.median(over_bidi), statistics.median(over_bidi_old)
        extra = {"bidi_median_ms": round(b, 2), "bidi_vs_websocket": round(b / s, 4),
                 "bidi_added_ms": round(statistics.median(x - y for x, y in zip(over_bidi, studio, strict=True)), 2),
                 "bidi_old_median_ms": round(old, 2), "bidi_old_vs_websocket": round(old / s, 4),
                 "bidi_old_added_ms": round(statistics.median(
                     x - y for x, y in zip(over_bidi_old, studio, strict=True)), 2),
                 "bidi_back_to_back_median_ms": round(statistics.median(back_to_back), 2),
                 "bidi_back_to_back_vs_websocket": round(statistics.median(back_to_back) / s, 4),
                 "bidi_old_back_to_back_median_ms": round(statistics.median(old_back_to_back), 2),
                 "bidi_old_back_to_back_vs_websocket": round(statistics.median(old_back_to_back) / s, 4),
                 "bidi_ms": [round(x, 1) for x in over_bidi], "bidi_old_ms": [round(x, 1) for x in over_bidi_old],
                 "bidi_back_to_back_ms": [round(x, 1) for x in back_to_back],
                 "bidi_old_back_to_back_ms": [round(x, 1) for x in old_back_to_back]}
    paired = statistics.median(b - a for a, b in zip(raw, studio, strict=True))
    return {
        "backend": args.backend, "target": url, "voice": voice, "split": args.split, "runs": args.runs,
        "raw_median_ms": round(r, 2), "studio_median_ms": round(s, 2),
        "studio_own_stats_median_ms": round(statistics.median(own), 2),
        "ratio": round(s / r, 4), "added_ms": round(paired, 2), "median_difference_ms": round(s - r, 2),
        "in_studio_ms": round(statistics.median(a - b for a, b in zip(studio, own, strict=True)), 3),
        "raw_ms": [round(x, 1) for x in raw], "studio_ms": [round(x, 1) for x in studio], **extra,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", type=backend_name, choices=["offline", "server", "sagemaker"], default="offline",
                   help="sagemaker: adds the HTTP/2 bidi path through the local emulator, same engine")
    p.add_argument("--url", help="vLLM-Omni server for --backend server")
    p.add_argument("--voice")
    p.add_argument("--split", choices=["none", "sentence", "clause"], default="clause")
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = p.parse_args()
    res = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(res))
        return
    ok = res["ratio"] <= TARGET_RATIO and res["added_ms"] <= TARGET_ADDED_MS
    print(f"voice TTFA, {res['runs']} interleaved runs each, {res['backend']} at {res['target']} (voice {res['voice']}, split {res['split']})")
    print(f"  raw websockets client  median {res['raw_median_ms']:8.2f} ms")
    print(f"  studio SpeechSession   median {res['studio_median_ms']:8.2f} ms   (its own stats.ttfa_ms median {res['studio_own_stats_median_ms']:.2f} ms)")
    print(f"  frame arrival → caller (parse, stats, recording, queue): {res['in_studio_ms']:.3f} ms median")
    print(f"  ratio {res['ratio']:.3f} (target ≤ {TARGET_RATIO}); studio adds {res['added_ms']:+.2f} ms paired median "
          f"({res['median_difference_ms']:+.2f} ms between medians; target ≤ {TARGET_ADDED_MS:.0f} ms)  → {'OK' if ok else 'MISSED'}")
    if "bidi_median_ms" in res:
        ok = res["bidi_vs_websocket"] <= TARGET_BIDI_RATIO
        print(f"  studio over SageMaker HTTP/2 (emulator), quiet connection, now  median {res['bidi_median_ms']:8.2f} ms: "
              f"{res['bidi_vs_websocket']:.2f}× the direct WebSocket path ({res['bidi_added_ms']:+.2f} ms paired median; "
              f"target ≤ {TARGET_BIDI_RATIO})  → {'OK' if ok else 'MISSED'}")
        print(f"  the same, old pattern (config at connect, a write per message) median {res['bidi_old_median_ms']:8.2f} ms: "
              f"{res['bidi_old_vs_websocket']:.2f}× ({res['bidi_old_added_ms']:+.2f} ms paired median)")
        print(f"  right after another session on the same connection: now {res['bidi_back_to_back_median_ms']:8.2f} ms "
              f"({res['bidi_back_to_back_vs_websocket']:.2f}×), old pattern {res['bidi_old_back_to_back_median_ms']:8.2f} ms "
              f"({res['bidi_old_back_to_back_vs_websocket']:.2f}×)")


if __name__ == "__main__":
    main()
