"""`python -m emulator` — run the local SageMaker emulator on 127.0.0.1.

    python -m emulator [--engine-url URL] [--s3-endpoint URL] [--config faults.json]
                                [--port 8092] [--tls-port 8443] [--state-dir DIR]
    python -m emulator exec [--region R] [--config faults.json] -- COMMAND ARGS...   (emulator/exec.py)

Without --engine-url it starts the offline engine (`python -m offline`) itself; without --s3-endpoint it
starts moto (S3 and STS) in-process. Once listening it prints one JSON line on stdout:

    {"emulator": "ready", "http": "http://127.0.0.1:8092", "https": "https://localhost:8443",
     "ca_file": ".../emulator-ca.pem", "s3": "...", "engine": "...", "region": "us-east-1", ...}

and, on stderr, the environment variables that point boto3 and the HTTP/2 SDK at it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from emulator.config import ConfigFileError, EmulatorConfig, load_config
from emulator.launch import client_env, start_moto
from protocol.errors import StudioError

log = logging.getLogger("emulator")


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it (Linux)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"cannot listen on 127.0.0.1:{port}: {exc.strerror} (pick another port, or 0 for a free one)") from exc
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


@contextlib.contextmanager
def _own_engine() -> Iterator[str]:
    """The offline engine as a child process on a free loopback port."""
    from offline.launch import start_engine

    try:
        engine = start_engine(timeout=120)
    except StudioError as exc:
        raise SystemExit(str(exc)) from exc
    print(f"offline engine started at {engine.url}", file=sys.stderr, flush=True)
    try:
        yield engine.url
    finally:
        engine.stop()


def _patch_hypercorn() -> None:
    """Three fixes to hypercorn 0.18 that full-duplex HTTP/2 event streams over TLS run into.

    1. A bidirectional stream can end from the server side (an error before the stream, the container
       closing) while the client is still sending, which RFC 9113 §8.1 allows. hypercorn forgets the
       stream when its response ends and then fails the whole connection with a KeyError on the next
       DATA frame; such frames are now acknowledged (flow control) and dropped.
    2. When the app stops without finishing its response (the "stream cut" fault), hypercorn sends
       nothing and the client waits forever; the stream is now reset (RST_STREAM INTERNAL_ERROR),
       which is what a dropped upstream looks like to a client.
    3. A client that closes TLS while data is still in flight (CRT does, after a reset) makes the
       connection's close raise ssl.SSLError, which fails the whole server at shutdown; it is a
       closed connection like any other.
    """
    import ssl

    import h2.errors
    import h2.events
    import h2.exceptions
    from hypercorn.asyncio.tcp_server import TCPServer
    from hypercorn.protocol.events import StreamClosed
    from hypercorn.protocol.h2 import H2Protocol

    if getattr(H2Protocol, "_omni_patched", False):
        return
    handle_events, stream_send, tcp_close = H2Protocol._handle_events, H2Protocol.stream_send, TCPServer._close

    async def tolerant_handle_events(self: H2Protocol, events: list[h2.events.Event]) -> None:
        # One at a time: a batch can open a stream (RequestReceived) and carry its first DATA.
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                await self._flush()
            else:
                await handle_events(self, [event])

    async def resetting_stream_send(self: H2Protocol, event: object) -> None:
        if isinstance(event, StreamClosed):
            buffer = self.stream_buffers.get(event.stream_id)
            if buffer is not None and not buffer._complete:  # the response never ended
                try:
                    self.connection.reset_stream(event.stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                except h2.exceptions.ProtocolError:
                    pass
                await buffer.close()
                del self.stream_buffers[event.stream_id]
                self.priority.remove_stream(event.stream_id)
                await self._flush()
        await stream_send(self, event)  # type: ignore[arg-type]

    async def quiet_close(self: TCPServer) -> None:
        try:
            await tcp_close(self)
        except ssl.SSLError:
            pass

    TCPServer._close = quiet_close  # type: ignore[method-assign]
    H2Protocol._handle_events = tolerant_handle_events  # type: ignore[method-assign]
    H2Protocol.stream_send = resetting_stream_send  # type: ignore[method-assign]
    H2Protocol._omni_patched = True  # type: ignore[attr-defined]


async def _serve(args: argparse.Namespace, config: EmulatorConfig, engine_url: str, s3_url: str | None, state_dir: Path) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from emulator.app import create_app
    from emulator.core import Emulator
    from emulator.tls import make_test_pki

    tls = make_test_pki(state_dir, regions=[config.region])  # names the AWS hosts of the region it serves
    _patch_hypercorn()
    plain, secure = _listen(args.port), _listen(args.tls_port)
    http_port, tls_port = plain.getsockname()[1], secure.getsockname()[1]

    hc = Config()
    hc.bind = [f"fd://{secure.detach()}"]
    hc.insecure_bind = [f"fd://{plain.detach()}"]
    hc.certfile, hc.keyfile = str(tls.cert_file), str(tls.key_file)
    hc.alpn_protocols = ["h2", "http/1.1"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.keep_alive_timeout = 75
    hc.graceful_timeout = 2
    hc.h2_max_inbound_frame_size = 1024 * 1024

    emu = Emulator(config, engine_url=engine_url, s3_endpoint=s3_url)
    await emu.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    ready = {
        "emulator": "ready",
        "http": f"http://127.0.0.1:{http_port}",
        "https": f"https://localhost:{tls_port}",
        "ca_file": str(tls.ca_file),
        "s3": s3_url,
        "engine": engine_url,
        "region": config.region,
        "account_id": config.account_id,
    }
    print(json.dumps(ready), flush=True)
    env = client_env(ready)
    shown = [f"  {k}={v}" for k, v in env.items()
             if k.startswith("AWS_ENDPOINT_URL_") or k in ("AWS_CA_BUNDLE", "AWS_DEFAULT_REGION")]
    print("local SageMaker emulator ready; point clients at it with:\n" + "\n".join(shown), file=sys.stderr, flush=True)
    try:
        await serve(create_app(emu), hc, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
    finally:
        await emu.close()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["exec"]:  # run a command against the emulated account (emulator/exec.py)
        from emulator.exec import main as exec_main

        sys.exit(exec_main(argv[1:]))
    parser = argparse.ArgumentParser(prog="python -m emulator", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine-url", help="a running offline engine / vLLM-Omni server (default: start `python -m offline`)")
    parser.add_argument("--s3-endpoint", help="a running moto server for S3/STS (default: start moto in-process)")
    parser.add_argument("--config", type=Path, help="JSON file: delays, quotas, faults (see offline/sagemaker/config.py)")
    parser.add_argument("--port", type=int, default=8092, help="plain HTTP port: control plane and runtime (0 = free port)")
    parser.add_argument("--tls-port", type=int, default=8443, help="TLS port (HTTP/2 + HTTP/1.1), also the bidi stream (0 = free port)")
    parser.add_argument("--state-dir", type=Path, help="where the test CA and certificate go (default: a temporary directory)")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")

    try:
        config = load_config(args.config)  # a bad file fails before anything is started
    except ConfigFileError as exc:
        raise SystemExit(str(exc)) from exc
    own_state = args.state_dir is None
    state_dir = Path(tempfile.mkdtemp(prefix="omni-sagemaker-emulator-")) if own_state else args.state_dir
    try:
        with contextlib.ExitStack() as stack:
            engine_url = args.engine_url.rstrip("/") if args.engine_url else stack.enter_context(_own_engine())
            s3_url = args.s3_endpoint.rstrip("/") if args.s3_endpoint else stack.enter_context(start_moto())
            asyncio.run(_serve(args, config, engine_url, s3_url, state_dir))
    finally:
        if own_state:
            shutil.rmtree(state_dir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
