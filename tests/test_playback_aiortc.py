"""Browser-free WebRTC check: PCM pushed through Playback reaches an aiortc peer as audible Opus audio.

The studio's side is exactly what the page uses: streamlit-webrtc's PCM source track behind
`services.playback.Playback`, served by `streamlit_webrtc.webrtc.WebRtcWorker(mode=RECVONLY)`. The other
side is an aiortc RTCPeerConnection with a recvonly audio transceiver, as a browser would offer. Both run
in a loopback-only network namespace (tests/browser_support.py); the test body runs there as
`python -m tests.test_playback_aiortc WAV` and prints its measurements as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np

TONE_HZ = 600.0
TONE_S = 0.8
RX_RATE = 48_000  # Opus decodes at 48 kHz


def _tone(seconds: float, freq: float, rate: int = 24_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * freq * t) * 9000).astype("<i2").tobytes()


async def _loopback(speech_pcm: bytes) -> dict:
    from aiortc import RTCConfiguration, RTCPeerConnection
    from aiortc.contrib.media import MediaRelay
    from streamlit_webrtc.pcm_source import PcmAudioSource
    from streamlit_webrtc.webrtc import WebRtcMode, WebRtcWorker

    from services.playback import Playback
    from services.runtime import BackgroundLoop

    worker_loop = BackgroundLoop("webrtc-worker")

    async def make_relay() -> MediaRelay:
        return MediaRelay()

    relay = worker_loop.run(make_relay())
    source = PcmAudioSource(sample_rate=24_000)
    playback = Playback()
    playback.attach(source)
    worker = WebRtcWorker(
        mode=WebRtcMode.RECVONLY, rtc_configuration=RTCConfiguration(iceServers=[]),
        source_video_track=None, source_audio_track=source.track, sink_video_track=None, sink_audio_track=None,
        player_factory=None, in_recorder_factory=None, out_recorder_factory=None, video_frame_callback=None,
        audio_frame_callback=None, queued_video_frames_callback=None, queued_audio_frames_callback=None,
        on_video_ended=None, on_audio_ended=None, video_processor_factory=None, audio_processor_factory=None,
        async_processing=True, video_receiver_size=4, audio_receiver_size=4, sendback_video=False,
        sendback_audio=True, loop=worker_loop.loop, relay=relay,
    )
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
    from tests.browser_support import require_netns, run_in_netns

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


if __name__ == "__main__":
    from services.speech.audio import read_wav

    pcm, rate, channels = read_wav(Path(sys.argv[1]).read_bytes())
    assert (rate, channels) == (24_000, 1)
    print(json.dumps(asyncio.run(_loopback(pcm))))
