"""The HTTP/2 connections under SageMaker's bidirectional stream (`aws-sdk-sagemaker-runtime-http2`, CRT
transport): one SDK client per event loop, shared by a backend's speech sessions (`Http2Clients`), and what each
connection is given (services/speech/sagemaker_http2.py streams over them).

- credentials are resolved by boto3's chain for every request (so long-lived studios pick up refreshed
  temporary credentials) and handed to the SDK in memory (`BotoCredentialsResolver`);
- TLS trusts the system store, or the PEM file in `AWS_CA_BUNDLE` when it is set (corporate proxies,
  the local emulator's test CA) (`crt_transport`);
- the CRT connection's socket gets TCP_NODELAY (awscrt has no option for it; the socket is found among the
  process's own descriptors by its peer address: `sockets_to`). Without it every small frame the client sends
  right after traffic (a session's END_STREAM and WINDOW_UPDATEs, the next stream's HEADERS and first events)
  waits for the server's delayed ACK: a session started right after another on the connection lost ~40 ms
  of first audio. It is set as each connection comes up, before the first request on it: the SDK hands back
  a bidirectional stream before its connection exists (it connects in a background task) and the session
  writes into it at once, so on a busy machine the socket only appears after the session's first send.
  Best effort: where descriptors cannot be listed, nothing changes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from protocol.errors import ConfigError
from services.aws import AwsSession

log = logging.getLogger(__name__)


def crt_transport(ca_file: str | Path | None = None,
                  on_connection: Callable[[], Awaitable[None]] | None = None) -> Any:
    """The SDK's CRT HTTP client, forced to HTTP/2; trusting `ca_file` (default: `AWS_CA_BUNDLE`) if set.
    `on_connection` is awaited as each new connection is up (TCP, TLS and HTTP/2), before any request on it."""
    from awscrt import io as crt_io
    from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

    ca = ca_file if ca_file is not None else os.environ.get("AWS_CA_BUNDLE") or None
    if ca is not None and not Path(ca).is_file():
        raise ConfigError(f"AWS_CA_BUNDLE points at {ca}, which is not a file; give the path of a PEM CA bundle")

    class _Http2Client(AWSCRTHTTPClient):
        def __init__(self, eventloop: Any = None, client_config: Any = None) -> None:
            super().__init__(eventloop=eventloop,
                             client_config=client_config or AWSCRTHTTPClientConfig(force_http_2=True))
            if ca is not None:
                options = crt_io.TlsContextOptions()
                options.override_default_trust_store_from_path(ca_filepath=str(ca))
                self._tls_ctx = crt_io.ClientTlsContext(options)

        async def _create_connection(self, url: Any) -> Any:
            connection = await super()._create_connection(url)
            if on_connection is not None:
                await on_connection()
            return connection

        def __deepcopy__(self, memo: Any) -> _Http2Client:
            # The SDK deep-copies its config for every call; the transport is a connection pool, not a
            # value: the copies share it, so the next stream reuses the open TLS + HTTP/2 connection.
            return self

    return _Http2Client()


class Http2Clients:
    """One SDK client (and so one CRT connection pool) per event loop, shared by a backend's speech sessions:
    a session after the first skips the TLS handshake and HTTP/2 set-up."""

    def __init__(self, aws: AwsSession, endpoint_uri: str) -> None:
        self.aws = aws
        self.endpoint_uri = endpoint_uri
        self._clients: dict[int, tuple[weakref.ref, Any]] = {}
        self.tcp_no_delay = True  # False: leave the sockets as the CRT made them (a benchmark's old pattern)
        self._peers: set[tuple[str, int]] | None = None  # the endpoint's addresses, resolved once
        self._no_delay_done: set[tuple[int, int]] = set()  # (device, inode) of sockets set, or to leave alone

    async def get(self) -> Any:
        from aws_sdk_sagemaker_runtime_http2.client import (
            AsyncSageMakerRuntimeHTTP2Client,
        )
        from aws_sdk_sagemaker_runtime_http2.config import (
            AsyncSageMakerRuntimeHTTP2Config,
        )

        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is not None and entry[0]() is loop:
            return entry[1]
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
            endpoint_uri=self.endpoint_uri, region=self.aws.region,
            aws_credentials_identity_resolver=BotoCredentialsResolver(self.aws),
            transport=crt_transport(on_connection=self.no_delay), max_attempts=1,
        )
        client = AsyncSageMakerRuntimeHTTP2Client(config=config)
        self._clients = {k: v for k, v in self._clients.items() if v[0]() is not None}  # loops that are gone
        self._clients[id(loop)] = (weakref.ref(loop), client)
        return client

    async def peers(self) -> set[tuple[str, int]]:
        """The endpoint's (address, port) pairs."""
        if self._peers is None:
            parts = urlsplit(self.endpoint_uri)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
            except OSError:
                infos = []
            self._peers = {(info[4][0], port) for info in infos}
        return self._peers

    async def no_delay(self) -> None:
        """TCP_NODELAY on this process's sockets to the endpoint that do not have it yet (see the module doc);
        the client calls it as each of its connections comes up. Never a reason to fail a session."""
        try:
            if self.tcp_no_delay and (peers := await self.peers()):
                self._no_delay_done |= sockets_to(peers, self._no_delay_done, no_delay=True)
        except Exception:
            log.debug("setting TCP_NODELAY on the HTTP/2 connection failed", exc_info=True)

    def leave_alone(self, sockets: set[tuple[int, int]]) -> None:
        """Never set TCP_NODELAY on these sockets (another client's connection to the same endpoint)."""
        self._no_delay_done |= sockets

    def discard(self) -> None:
        """Forget this loop's client (after a failure: the next session builds a fresh connection)."""
        try:
            self._clients.pop(id(asyncio.get_running_loop()), None)
        except RuntimeError:
            pass


def sockets_to(peers: set[tuple[str, int]], skip: set[tuple[int, int]] = frozenset(), *,
               no_delay: bool = False) -> set[tuple[int, int]]:
    """This process's TCP sockets connected to one of `peers` ((address, port)), as (device, inode), except
    those in `skip`; with `no_delay`, TCP_NODELAY is set on each."""
    fd_dir = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return set()
    found = set()
    for name in names:
        try:
            info = os.fstat(int(name))
        except (ValueError, OSError):
            continue
        key = (info.st_dev, info.st_ino)
        if not stat.S_ISSOCK(info.st_mode) or (info.st_ino and key in skip):
            continue
        try:
            sock = socket.socket(fileno=os.dup(int(name)))  # a second handle: closing it leaves the socket open
        except OSError:
            continue
        try:
            if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            address, port = sock.getpeername()[:2]
            if (address.removeprefix("::ffff:"), port) in peers or (address, port) in peers:
                if no_delay:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                found.add(key)
        except OSError:
            pass
        finally:
            sock.close()
    return found



class BotoCredentialsResolver:
    """The SDK's identity resolver, answering with boto3's current credentials (never cached here)."""

    def __init__(self, aws: AwsSession) -> None:
        self._aws = aws

    async def get_identity(self, *, properties: Any) -> Any:
        from smithy_aws_core.identity.components import AWSCredentialsIdentity

        creds = await asyncio.to_thread(self._aws.credentials)
        return AWSCredentialsIdentity(access_key_id=creds.access_key_id, secret_access_key=creds.secret_access_key,
                                      session_token=creds.session_token)

    async def invalidate(self) -> None:
        return None
