"""HAProxy (Debian's) in front of studio replicas, for bench/replicas.py and the replicas' browser test: round
robin, each replica checked on its storage-aware `/_stcore/health`, WebSockets kept open, and — with `sticky` —
a SERVERID cookie that keeps a browser on its replica and moves it when that replica is down (redispatch)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HAPROXY = "/usr/sbin/haproxy"
INSTALL = "apt-get install -y haproxy"


def config(port: int, replicas: dict[str, int], *, sticky: bool) -> str:
    cookie = " cookie {name}" if sticky else ""
    servers = "\n".join(f"    server {name} 127.0.0.1:{p} check" + cookie.format(name=name)
                        for name, p in replicas.items())
    stickiness = "    cookie SERVERID insert indirect nocache httponly\n" if sticky else ""
    return f"""global
    maxconn 1024
defaults
    mode http
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    option redispatch
    retries 3
frontend studio
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
{stickiness}    option httpchk GET /_stcore/health
    http-check expect status 200
    default-server inter 500 fall 2 rise 1
{servers}
"""


@contextmanager
def haproxy(port: int, replicas: dict[str, int], folder: Path, *, sticky: bool) -> Iterator[subprocess.Popen]:
    """HAProxy on 127.0.0.1:`port` in front of `replicas` (name -> port) until the block ends; its config and log
    in `folder`. Waits until it answers the health route through a replica."""
    from offline.launch import stop, wait_http_ok

    if not Path(HAPROXY).exists():
        raise RuntimeError(f"HAProxy is not installed: {INSTALL}")
    path = folder / f"haproxy-{port}.cfg"
    path.write_text(config(port, replicas, sticky=sticky))
    log = folder / f"haproxy-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([HAPROXY, "-f", str(path), "-db"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=30, what="HAProxy",
                     log_tail=lambda: log.read_text(errors="replace")[-3000:])
        yield proc
    finally:
        if proc.poll() is None:
            stop(proc)
