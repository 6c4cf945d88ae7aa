"""What `python -m emulator exec` serves on its namespace's loopback (emulator/exec.py makes the namespace):
AWS's host names, and port 443.

- `hosts_text`: /etc/hosts lines mapping this region's AWS host names (emulator/tls.py's certificate names,
  spelled out: /etc/hosts has no wildcards) to the emulator on API_ADDRESS, and S3's to S3_ADDRESS;
  `BucketHosts` keeps the bind-mounted file naming every bucket's virtual host as buckets are created;
- `relays`: 443 on API_ADDRESS relayed byte for byte to the emulator's TLS port (TLS and h2 end at the
  emulator), and 443 on S3_ADDRESS ending TLS with the emulator's certificate in front of its moto.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from emulator.launch import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY
from emulator.tls import aws_host_names

API_ADDRESS = "127.0.0.1"  # everything but S3: the emulator
S3_ADDRESS = "127.0.0.3"  # S3: a TLS front to the emulator's moto (one 443 per address, so no routing by name)
BUCKET_POLL_S = 0.2


# -- host names -----------------------------------------------------------------------------------
# The names the emulator's certificate carries (emulator/tls.py), spelled out for /etc/hosts, which has no
# wildcards: S3's `*.s3…` become one name per bucket that exists.
def _is_s3(name: str) -> bool:
    return name.startswith("s3.") or ".s3." in name


def api_host_names(region: str) -> list[str]:
    return [name for name in aws_host_names(region) if not _is_s3(name)]


def s3_host_names(region: str, buckets: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    names = [name for name in aws_host_names(region) if _is_s3(name) and not name.startswith("*.")]
    for wildcard in (name for name in aws_host_names(region) if _is_s3(name) and name.startswith("*.")):
        # a dotted bucket name cannot match the certificate's one-label wildcard: clients use path style for it
        names += [wildcard.replace("*", bucket, 1) for bucket in buckets if "." not in bucket]
    return names


def hosts_text(base: str, region: str, buckets: list[str]) -> str:
    lines = [base.rstrip("\n"), "# python -m emulator exec: AWS's names for the local SageMaker emulator"]
    lines += [f"{API_ADDRESS} {name}" for name in api_host_names(region)]
    lines += [f"{S3_ADDRESS} {name}" for name in s3_host_names(region, buckets)]
    return "\n".join(lines) + "\n"


# -- relays ---------------------------------------------------------------------------------------
async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        writer.close()


def _relay_to(host: str, port: int) -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


@contextlib.contextmanager
def relays(ready: dict[str, Any], tls_dir: Path) -> Iterator[None]:
    """443 -> the emulator's TLS port (bytes as they are: TLS and h2 end at the emulator), and S3's 443 -> TLS
    ended here with the emulator's certificate, plain HTTP to its moto. On their own event loop thread."""
    s3 = ready["s3"].removeprefix("http://").rsplit(":", 1)
    tls_port = int(ready["https"].rsplit(":", 1)[1])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_dir / "emulator-server.pem", tls_dir / "emulator-server.key")
    context.set_alpn_protocols(["http/1.1"])
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    async def serve() -> None:
        try:
            box["servers"] = [
                await asyncio.start_server(_relay_to(API_ADDRESS, tls_port), API_ADDRESS, 443),
                await asyncio.start_server(_relay_to(s3[0], int(s3[1])), S3_ADDRESS, 443, ssl=context),
            ]
        except OSError as exc:
            box["error"] = exc
        finally:
            started.set()

    def run() -> None:
        loop.create_task(serve())
        loop.run_forever()

    thread = threading.Thread(target=run, name="emulator-exec-relays", daemon=True)
    thread.start()
    started.wait()
    if "error" in box:
        raise SystemExit(f"python -m emulator exec: cannot listen on port 443 inside the namespace: {box['error']}")
    try:
        yield
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


class BucketHosts:
    """Keeps /etc/hosts (the bind-mounted file, rewritten in place) naming every bucket's virtual host."""

    def __init__(self, hosts: Path, base: str, ready: dict[str, Any]) -> None:
        self.hosts, self.base, self.ready = hosts, base, ready
        self.known: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="emulator-exec-buckets", daemon=True)

    def write(self) -> None:
        text = hosts_text(self.base, self.ready["region"], self.known)
        with open(self.hosts, "r+") as f:  # the same inode: the bind mount shows it
            f.write(text)
            f.truncate()

    def __enter__(self) -> BucketHosts:
        self.hosts.write_text(hosts_text(self.base, self.ready["region"], []))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        import boto3

        s3 = boto3.Session(aws_access_key_id=FAKE_ACCESS_KEY_ID, aws_secret_access_key=FAKE_SECRET_ACCESS_KEY,
                           region_name=self.ready["region"]).client("s3", endpoint_url=self.ready["s3"])
        while not self._stop.wait(BUCKET_POLL_S):
            try:
                names = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
            except Exception:  # moto busy or stopping: the next round
                continue
            if names != self.known:
                self.known = names
                self.write()
