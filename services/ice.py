"""Where the studio's WebRTC player listens: ICE host candidates on loopback only, for a local-only studio.

The player's peer connection is aiortc's, and aiortc's ICE is aioice: for every connection, aioice binds
a UDP socket on each address of each interface (all but exactly 127.0.0.1) and offers it to the browser as
a host candidate; and when the browser names its own candidates with mDNS (`….local`, as Chrome does for
pages without camera or microphone permission), aioice resolves them with a multicast socket bound to port
5353 of every interface. A studio whose web server listens on 127.0.0.1 would so open UDP ports on the LAN.

There is no setting for this. aioice's `Connection` takes only `use_ipv4`/`use_ipv6`; aiortc's
`RTCConfiguration` only ICE servers, a transport policy and a bundle policy (the "relay" policy would drop
host candidates altogether, and with them local playback); streamlit-webrtc's `server_rtc_configuration`
is compiled down to the ICE servers. aioice's maintainers declined an address filter (aiortc/aioice
issue #2, pull request #57). The narrowest patch point is the one function aioice asks for the addresses,
`aioice.ice.get_host_addresses(use_ipv4, use_ipv6)`, looked up by name each time a connection gathers its
candidates: `bind_to_loopback()` replaces it with `loopback_host_addresses`, which answers the machine's
loopback addresses — 127.0.0.1 included, since the browser runs on this machine. It also replaces
`aioice.ice.get_or_create_mdns_protocol` (looked up the same way) with a resolver that opens no socket and
resolves nothing: a browser's mDNS candidate is then ignored, and the browser on this machine still
connects, its checks to the studio's loopback candidate being answered (a peer-reflexive pair, RFC 8445
7.3.1.3). aioice is pinned in requirements.txt for these two names; tests/test_playback_aiortc.py checks
the sockets a player connection binds.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable
from typing import Any

import aioice.ice
import ifaddr

LOCAL_HOSTS = {"localhost", "localhost.localdomain", "ip6-localhost"}

PATCHED = ("get_host_addresses", "get_or_create_mdns_protocol")  # the names in aioice.ice replaced

_lock = threading.Lock()
_aioice_own: dict[str, Callable[..., Any]] = {}


def is_loopback_host(host: str | None) -> bool:
    """True when a server address ("127.0.0.1", "::1", "localhost", …) reaches this machine only; False for
    "0.0.0.0", "" / None (every interface) or any other name or address."""
    if not host:
        return False
    host = host.strip().strip("[]").lower()
    if host in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_host_addresses(use_ipv4: bool = True, use_ipv6: bool = True) -> list[str]:
    """The machine's loopback addresses (127.0.0.0/8, ::1) on any interface, in interface order."""
    out: list[str] = []
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            address = ip.ip if isinstance(ip.ip, str) else ip.ip[0]
            wanted = use_ipv4 if isinstance(ip.ip, str) else use_ipv6
            if wanted and ipaddress.ip_address(address).is_loopback and address not in out:
                out.append(address)
    return out


class _NoMdns:
    """Stands in for aioice's mDNS protocol: no socket, and no name resolves."""

    async def resolve(self, hostname: str, timeout: float | None = 1.0) -> str | None:
        return None


_NO_MDNS = _NoMdns()


async def _no_mdns_protocol(subscriber: object) -> _NoMdns:
    return _NO_MDNS


_LOOPBACK = {"get_host_addresses": loopback_host_addresses, "get_or_create_mdns_protocol": _no_mdns_protocol}


def bind_to_loopback(enabled: bool = True) -> None:
    """From now on, every aioice connection of this process gathers (and binds) host candidates on loopback
    addresses only and resolves no mDNS name; `enabled=False` gives aioice its own behaviour back.
    Connections already made keep their sockets."""
    with _lock:
        if not _aioice_own:
            missing = [name for name in PATCHED if not callable(getattr(aioice.ice, name, None))]
            if missing:
                raise RuntimeError(f"aioice.ice has no {', '.join(missing)}: the ICE patch points changed with "
                                   "this aioice version (see services/ice.py)")
            _aioice_own.update({name: getattr(aioice.ice, name) for name in PATCHED})
        for name in PATCHED:
            setattr(aioice.ice, name, _LOOPBACK[name] if enabled else _aioice_own[name])


def bound_to_loopback() -> bool:
    """Whether `bind_to_loopback()` is in force."""
    return aioice.ice.get_host_addresses is loopback_host_addresses
