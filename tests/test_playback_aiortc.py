"""Browser-free WebRTC check: PCM pushed through Playback reaches an aiortc peer as audible Opus audio.

The studio's side is exactly what the page uses: streamlit-webrtc's PCM source track behind
`services.playback.Playback`, served by `streamlit_webrtc.webrtc.WebRtcWorker(mode=RECVONLY)`. The other
side is an aiortc RTCPeerConnection with a recvonly audio transceiver, as a browser would offer. Both run
in a loopback-only network namespace (tests/browser_support.py); the test body runs there as
`python -m tests.test_playback_aiortc WAV` and prints its measurements as JSON.

Where the studio's side binds its UDP sockets is checked in a namespace that also has a "LAN" address
(a veth pair with 10.255.0.1 and fd00:5::1 that leads nowhere): a studio listening on 127.0.0.1 must bind
loopback only (services/ice.py), one listening on every interface binds the LAN address too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
from pathlib import Path

import numpy as np

from tests.cli_support import run_cli

TONE_HZ = 600.0
TONE_S = 0.8
RX_RATE = 48_000  # Opus decodes at 48 kHz
LAN_V4, LAN_V6 = "10.255.0.1", "fd00:5::1"
# A candidate named with mDNS, as Chrome names its own for pages without camera or microphone permission.
MDNS_CANDIDATE = "a=candidate:1 1 udp 2122260223 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.local 40000 typ host"
# The namespace of tests/browser_support.py plus a veth pair carrying the "LAN" addresses.
_LAN_PRELUDE = ("ip link set lo up && ip addr add 127.0.0.2/8 dev lo && ip link add lan0 type veth peer name lan1"
                f" && ip addr add {LAN_V4}/24 dev lan0 && ip addr add {LAN_V6}/64 dev lan0 nodad"
                ' && ip link set lan1 up && ip link set lan0 up && exec "$@"')


def _tone(seconds: float, freq: float, rate: int = 24_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * freq * t) * 9000).astype("<i2").tobytes()


def _studio_worker(worker_loop, source):
    """The studio's side, as streamlit-webrtc makes it for the voice page's player."""
    from aiortc import RTCConfiguration
    from aiortc.contrib.media import MediaRelay
    from streamlit_webrtc.webrtc import WebRtcMode, WebRtcWorker

    async def make_relay() -> MediaRelay:
        return MediaRelay()

    return WebRtcWorker(
        mode=WebRtcMode.RECVONLY, rtc_configuration=RTCConfiguration(iceServers=[]),
        source_video_track=None, source_audio_track=source.track, sink_video_track=None, sink_audio_track=None,
        player_factory=None, in_recorder_factory=None, out_recorder_factory=None, video_frame_callback=None,
        audio_frame_callback=None, queued_video_frames_callback=None, queued_audio_frames_callback=None,
        on_video_ended=None, on_audio_ended=None, video_processor_factory=None, audio_processor_factory=None,
        async_processing=True, video_receiver_size=4, audio_receiver_size=4, sendback_video=False,
        sendback_audio=True, loop=worker_loop.loop, relay=worker_loop.run(make_relay()),
    )


async def _loopback(speech_pcm: bytes) -> dict:
    from aiortc import RTCConfiguration, RTCPeerConnection
    from streamlit_webrtc.pcm_source import PcmAudioSource

    from services.playback import Playback
    from services.runtime import BackgroundLoop

    worker_loop = BackgroundLoop("webrtc-worker")
    source = PcmAudioSource(sample_rate=24_000)
    playback = Playback()
    playback.attach(source)
    worker = _studio_worker(worker_loop, source)
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTransceiver("audio", direction="recvonly")
    got_track: asyncio.Future = asyncio.get_running_loop().create_future()
    pc.on("track", lambda t: got_track.done() or got_track.set_result(t))
    try:
        await pc.setLocalDescription(await pc.createOffer())
        answer = await asyncio.to_thread(worker.process_offer, pc.localDescription.sdp, pc.localDescription.type, 15)
        await pc.setRemoteDescription(answer)
        track = await asyncio.wait_for(got_track, 15)

        received: list[np.ndarray] = []

        async def take(seconds: float) -> None:
            n = 0
            while n < seconds * RX_RATE:
                frame = await asyncio.wait_for(track.recv(), 5)
                x = frame.to_ndarray().reshape(-1, len(frame.layout.channels)).mean(axis=1)
                received.append(x)
                n += x.size

        await take(0.4)  # connected, nothing pushed yet: padded silence
        silence_samples = sum(x.size for x in received)
        playback.start_utterance()
        playback.push(_tone(TONE_S, TONE_HZ))
        for i in range(0, len(speech_pcm), 4800):  # speech in 100 ms chunks, as the stream delivers it
            playback.push(speech_pcm[i:i + 4800])
        await take(TONE_S + len(speech_pcm) / 48_000 + 0.5)
    finally:
        await pc.close()
        source.track.stop()
        worker.stop(timeout=2)
        worker_loop.stop()

    x = np.concatenate(received)
    silence, rest = x[:silence_samples], x[silence_samples:]
    onset = int(np.argmax(np.abs(rest) > 1000)) if np.any(np.abs(rest) > 1000) else -1
    tone = rest[onset + int(0.1 * RX_RATE): onset + int((TONE_S - 0.1) * RX_RATE)] if onset >= 0 else rest[:0]
    speech = rest[onset + int((TONE_S + 0.05) * RX_RATE): onset + int((TONE_S + len(speech_pcm) / 48_000) * RX_RATE)] if onset >= 0 else rest[:0]

    def peak_hz(sig: np.ndarray) -> float:
        spec = np.abs(np.fft.rfft(sig * np.hanning(sig.size)))
        return float(np.fft.rfftfreq(sig.size, 1 / RX_RATE)[np.argmax(spec)]) if sig.size else 0.0

    def band_share(sig: np.ndarray, lo: float, hi: float) -> float:
        spec = np.abs(np.fft.rfft(sig)) ** 2
        f = np.fft.rfftfreq(sig.size, 1 / RX_RATE)
        return float(spec[(f >= lo) & (f <= hi)].sum() / max(spec.sum(), 1e-9)) if sig.size else 0.0

    rms = lambda s: float(np.sqrt(np.mean(s.astype(np.float64) ** 2))) if s.size else 0.0  # noqa: E731
    return {
        "pushed_chunks": playback.pushed_chunks,
        "received_seconds": round(x.size / RX_RATE, 3),
        "silence_rms": rms(silence),
        "onset_s": round(onset / RX_RATE, 3) if onset >= 0 else None,
        "tone_peak_hz": peak_hz(tone),
        "tone_rms": rms(tone),
        "speech_rms": rms(speech),
        "speech_band_share": band_share(speech, 80, 5000),
    }


def test_pushed_speech_arrives_through_webrtc_with_energy(engine_url: str, tmp_path: Path) -> None:
    from services.speech import omni_client, speech_config
    from bench.browser import run_in_netns
    from tests.browser_support import require_netns

    require_netns()
    u = asyncio.run(omni_client(engine_url).say(speech_config(), "Audio goes through the WebRTC track, chunk by chunk."))
    assert u.ok and u.stats.audio_seconds > 1.0
    wav = tmp_path / "speech.wav"
    wav.write_bytes(u.wav())

    proc = run_in_netns([sys.executable, "-m", "tests.test_playback_aiortc", str(wav)], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    print(m)
    assert m["pushed_chunks"] >= 10
    assert m["silence_rms"] < 50  # before the push: silence padding
    assert m["onset_s"] is not None
    assert abs(m["tone_peak_hz"] - TONE_HZ) < 15  # the pushed tone, through Opus at 48 kHz
    assert m["tone_rms"] > 3000
    assert m["speech_rms"] > 300 and m["speech_band_share"] > 0.9  # speech energy arrived


def _udp_sockets() -> set[tuple[str, int]]:
    """Every bound UDP socket of the namespace: (address, port), from /proc/net/udp and udp6."""
    out = set()
    for name in ("udp", "udp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            hex_addr, hex_port = line.split()[1].split(":")
            raw = bytes.fromhex(hex_addr)  # 32-bit words in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.add((str(ipaddress.ip_address(raw)), int(hex_port, 16)))
    return out


async def _bindings(server_address: str) -> dict:
    """The studio's player, with ui.voice_player's ICE scope for `server_address`, against a peer that offers
    every address it has and an mDNS name: the sockets the studio's side bound, its candidates, and whether
    a tone arrives."""
    from aiortc import RTCConfiguration, RTCPeerConnection
    from streamlit_webrtc.pcm_source import PcmAudioSource

    from services.ice import bind_to_loopback
    from services.runtime import BackgroundLoop
    from ui.voice_player import ice_scope

    bind_to_loopback(False)  # the browser's stand-in gathers as aioice does by itself
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTransceiver("audio", direction="recvonly")
    got_track: asyncio.Future = asyncio.get_running_loop().create_future()
    pc.on("track", lambda t: got_track.done() or got_track.set_result(t))
    await pc.setLocalDescription(await pc.createOffer())
    lines = pc.localDescription.sdp.splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("a=candidate:"))
    offer = "\r\n".join([*lines[:last + 1], MDNS_CANDIDATE, *lines[last + 1:]]) + "\r\n"
    before = _udp_sockets()
    loopback_only = ice_scope(server_address, [])
    worker_loop = BackgroundLoop("webrtc-worker")
    source = PcmAudioSource(sample_rate=24_000)
    worker = _studio_worker(worker_loop, source)
    try:
        answer = await asyncio.to_thread(worker.process_offer, offer, pc.localDescription.type, 15)
        studio_sockets = sorted(_udp_sockets() - before)
        candidates = sorted({line.split()[4] for line in answer.sdp.splitlines() if line.startswith("a=candidate:")})
        await pc.setRemoteDescription(answer)
        track = await asyncio.wait_for(got_track, 15)
        source.push(np.frombuffer(_tone(0.6, TONE_HZ), "<i2"))
        peak = 0.0
        for _ in range(60):  # 1.2 s of 20 ms frames
            frame = await asyncio.wait_for(track.recv(), 5)
            peak = max(peak, float(np.abs(frame.to_ndarray()).max()))
    finally:
        await pc.close()
        source.track.stop()
        worker.stop(timeout=2)
        worker_loop.stop()
    return {"loopback_only": loopback_only, "studio_sockets": studio_sockets, "candidates": candidates,
            "peer_offered": sorted({line.split()[4] for line in pc.localDescription.sdp.splitlines()
                                    if line.startswith("a=candidate:")}),
            "tone_peak": peak}


def test_the_ice_scope_follows_the_server_address_and_the_ice_servers() -> None:
    from services.ice import bind_to_loopback, bound_to_loopback
    from ui.voice_player import ice_scope

    stun = [{"urls": "stun:stun.example.org:3478"}]  # for browsers elsewhere, which loopback cannot reach
    cases = [("127.0.0.1", [], True), ("localhost", [], True), ("::1", [], True), ("127.0.0.2", [], True),
             ("0.0.0.0", [], False), ("", [], False), (None, [], False), ("192.168.1.5", [], False),
             ("studio.example.org", [], False), ("127.0.0.1", stun, False)]
    try:
        for address, servers, local in cases:
            assert ice_scope(address, servers) is local and bound_to_loopback() is local, (address, servers)
    finally:
        bind_to_loopback(False)


def test_a_local_only_studio_binds_its_webrtc_sockets_to_loopback() -> None:
    from bench.browser import ROOT
    from tests.browser_support import require_netns

    require_netns()
    proc = run_cli(["unshare", "-n", "sh", "-c", _LAN_PRELUDE, "sh", sys.executable, "-m",
                           "tests.test_playback_aiortc", "--bindings"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    everywhere, local = json.loads(proc.stdout.strip().splitlines()[-1])
    print(everywhere, local, sep="\n")
    # Listening on every interface, the studio offers (and binds) the LAN address as aioice does by itself,
    # and resolves the peer's mDNS name on port 5353 of every interface.
    assert not everywhere["loopback_only"] and LAN_V4 in everywhere["candidates"]
    assert {LAN_V4, "0.0.0.0"} <= {a for a, _ in everywhere["studio_sockets"]}
    # Listening on 127.0.0.1 (the shipped .streamlit/config.toml), it binds loopback only — 127.0.0.1 too,
    # which aioice leaves out by itself — though the peer offered its LAN addresses, and the audio plays.
    assert local["loopback_only"] and {LAN_V4, LAN_V6} <= set(local["peer_offered"])
    assert local["studio_sockets"] and all(ipaddress.ip_address(a).is_loopback for a, _ in local["studio_sockets"])
    assert "127.0.0.1" in local["candidates"]
    assert all(ipaddress.ip_address(a).is_loopback for a in local["candidates"])
    assert local["tone_peak"] > 3000


if __name__ == "__main__" and sys.argv[1:] == ["--bindings"]:
    print(json.dumps([asyncio.run(_bindings(address)) for address in ("0.0.0.0", "127.0.0.1")]))
elif __name__ == "__main__":
    from services.speech.audio import read_wav

    pcm, rate, channels = read_wav(Path(sys.argv[1]).read_bytes())
    assert (rate, channels) == (24_000, 1)
    print(json.dumps(asyncio.run(_loopback(pcm))))
