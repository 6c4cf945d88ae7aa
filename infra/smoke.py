"""Smoke tests through the studio's own services layer — the code path the pages use.

    report = run_smoke(backend, out_dir)      # backend: services.backend.Backend (speech/images/videos)

- voice: one streamed utterance; passes with `audio.start`, `audio.done` and more than 2 000 bytes of
  PCM; saves `validation-output.wav`. It asks for the task type the voice model serves (`voice_task`): a
  preset voice (CustomVoice), a voice from a description (VoiceDesign), or a clone (Base) of a synthetic
  voiced reference — the smoke test has no recording of a person, and needs none to show the model speaks.
- image: a 4-step image; passes with a decodable PNG; saves `smoke-image.png`.
- video: a 4-step job — a smoke test only (too few steps to keep a composition) — conditioned on the
  smoke image when there is one; passes with a decodable MP4; saves `smoke-only-video.mp4`.
- listen: the voice check's recording when it passed in this run, else the offline engine's voice saying the
  same line, sent as a file; passes when text comes back; saves `smoke-transcript.txt` (its word error rate
  against the line in the figures).
- omni: a one-turn native conversation — vLLM-Omni's duplex session (`/v1/realtime?duplex=1`; on SageMaker over
  the HTTP/2 bidirectional stream) held by services/converse/native.py with a short recorded turn (the voice
  check's recording when it passed in this run, else the offline engine's voice saying a short sentence); passes
  when the session opens and a transcript and a reply with the agent's audio come back; saves
  `smoke-conversation.wav` (the person left, the agent right). A failure names what did not come: the session
  (refused, or no duplex session: vLLM-Omni's `unsupported`), the transcript, the reply audio, or the time.

`deployment_backend(state)` builds the SageMaker backend for a deployment from its state file.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.model import DEFAULT_ROLES, ROLES, Role
from protocol.errors import BackendUnreachable, StudioError
from protocol.speech import TaskType, task_types_for_model
from services.pricing import usd

if TYPE_CHECKING:
    from infra.state import DeploymentState
    from infra.status import StatusReport
    from services.backend import Backend
    from services.converse.native import SessionOpener
    from services.settings import Settings

VOICE_FILE = "validation-output.wav"
IMAGE_FILE = "smoke-image.png"
VIDEO_FILE = "smoke-only-video.mp4"
LISTEN_FILE = "smoke-transcript.txt"
OMNI_FILE = "smoke-conversation.wav"
MIN_AUDIO_BYTES = 2000
SMOKE_TEXT = "Hello from Omni Studio. This is the smoke test of the voice endpoint."
SMOKE_TURN_TEXT = "Hello! What time do you open today?"  # the omni check's turn when there is no voice recording
IMAGE_PROMPT = "a red lighthouse on a rocky coast at dawn, smoke test"
VIDEO_PROMPT = "waves roll against the lighthouse, smoke test"
SMOKE_STEPS = 4  # image: FLUX.2-klein's own count; video: smoke-only (the default is 30)
SMOKE_VOICE_DESCRIPTION = "A calm adult voice, clear and even, speaking at a moderate pace."
SMOKE_REFERENCE_SECONDS = 4.0
VOICE_TIMEOUT_S = 180.0
VIDEO_TIMEOUT_S = 900.0
OMNI_TIMEOUT_S = 120.0  # the whole one-turn conversation: the turn at real time, the silence window, the reply
SCALE_OUT_MINUTES = 10  # an instance from 0 on AWS: the alarm, a GPU instance, the image and the model


@dataclass
class SmokeCheck:
    role: Role
    ok: bool
    detail: str
    path: Path | None = None
    bytes: int = 0
    elapsed_s: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "ok": self.ok, "detail": self.detail,
                "path": None if self.path is None else str(self.path), "bytes": self.bytes,
                "elapsed_s": round(self.elapsed_s, 3), "figures": self.figures}


@dataclass
class SmokeReport:
    target: str
    checks: list[SmokeCheck]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def check(self, role: Role) -> SmokeCheck | None:
        return next((c for c in self.checks if c.role == role), None)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "target": self.target, "checks": [c.to_dict() for c in self.checks]}


SmokeProgress = Callable[[SmokeCheck], None]


def run_smoke(backend: Backend, out_dir: Path, roles: Sequence[Role] = DEFAULT_ROLES, *,
              progress: SmokeProgress | None = None, voice_timeout_s: float = VOICE_TIMEOUT_S,
              video_timeout_s: float = VIDEO_TIMEOUT_S, voice_task: TaskType | None = None,
              duplex: str | SessionOpener | None = None, omni_timeout_s: float = OMNI_TIMEOUT_S) -> SmokeReport:
    """Run the smoke test of each role in `roles` (catalog order; the published three unless an opt-in family
    is named) and save what they produce.
    `voice_task`: the task type the voice model serves (None: the server's default, a preset voice).
    `duplex`: where the omni check holds its session — a server's URL, or an opener (a SageMaker endpoint's
    bidirectional stream: `smoke_deployment` passes one); None: the backend's own URL (the offline engine, a
    vLLM-Omni server)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    checks: list[SmokeCheck] = []
    image_png: bytes | None = None
    for role in (r for r in ROLES if r in roles):
        t0 = time.perf_counter()
        voice = next((c for c in checks if c.role == "voice" and c.ok and c.path), None)
        recording = voice.path.read_bytes() if voice and voice.path else None
        try:
            if role == "voice":
                check = smoke_voice(backend, out_dir, timeout_s=voice_timeout_s, task_type=voice_task)
            elif role == "image":
                check, image_png = smoke_image(backend, out_dir)
            elif role == "listen":
                check = smoke_listen(backend, out_dir, recording=recording)
            elif role == "omni":
                check = smoke_omni(duplex or _backend_url(backend), out_dir, recording=recording,
                                   timeout_s=omni_timeout_s, what=backend.label)
            else:
                check = smoke_video(backend, out_dir, reference=image_png, timeout_s=video_timeout_s)
        except StudioError as exc:
            check = SmokeCheck(role, False, str(exc))
        check.elapsed_s = time.perf_counter() - t0
        checks.append(check)
        if progress is not None:
            progress(check)
    return SmokeReport(backend.target, checks)


def smoke_listen(backend: Backend, out_dir: Path, *, recording: bytes | None = None,
                 timeout_s: float = VOICE_TIMEOUT_S) -> SmokeCheck:
    """Transcribe a short recording of SMOKE_TEXT as a file; passes when text comes back."""
    from services.listen import load_audio, spoken_sample, word_error_rate

    source = "the voice check's recording" if recording else "the offline engine's voice"
    audio = load_audio(recording or spoken_sample(SMOKE_TEXT), name="smoke speech")

    listener = backend.client("listen")

    async def listen() -> Any:
        return await asyncio.wait_for(listener.transcribe_file(audio), timeout_s)

    try:
        transcript = asyncio.run(listen())
    except TimeoutError:
        return SmokeCheck("listen", False, f"no transcript from {listener.target} within {timeout_s:.0f} s")
    path = out_dir / LISTEN_FILE
    path.write_text(transcript.text + "\n", encoding="utf-8")
    wer = word_error_rate(SMOKE_TEXT, transcript.text)
    figures = {"audio_s": round(audio.seconds, 3), "rtf": transcript.rtf and round(transcript.rtf, 4),
               "wer": round(wer, 4), "source": source}
    return SmokeCheck("listen", True, f"{len(transcript.text.split())} words from {audio.seconds:.1f} s of "
                                      f"{source} (WER {wer:.0%})", path, len(transcript.text.encode()), figures=figures)


def _backend_url(backend: Backend) -> str | None:
    """The server a backend's requests go to, when it is one URL (the offline engine, a vLLM-Omni server)."""
    return backend.target if backend.name in ("offline", "omni") else None


def smoke_omni(session: str | SessionOpener | None, out_dir: Path, *, recording: bytes | None = None,
               timeout_s: float = OMNI_TIMEOUT_S, what: str = "this target") -> SmokeCheck:
    """One turn of a native conversation (see the module's doc) at `session`: a server's URL or an opener."""
    from services.converse.native import Native, NoDuplexSession
    from services.listen import load_audio, spoken_sample

    if session is None:
        return SmokeCheck("omni", False, f"{what} has no omni endpoint to hold a speech-to-speech session with")
    source = "the voice check's recording" if recording else "the offline engine's voice"
    audio = load_audio(recording or spoken_sample(SMOKE_TURN_TEXT), name="smoke turn")
    native = Native(session, reply_label="the omni endpoint's speech-to-speech session")
    where = native.url
    try:
        conv = asyncio.run(asyncio.wait_for(native.run([audio]), timeout_s))
    except TimeoutError:
        return SmokeCheck("omni", False, f"timed out: no complete turn from {where} within {timeout_s:.0f} s")
    except NoDuplexSession:
        return SmokeCheck("omni", False, f"session refused: {where} has no speech-to-speech session (it answered "
                                         "vLLM-Omni's `unsupported` to the duplex session.update)")
    except BackendUnreachable as exc:
        return SmokeCheck("omni", False, f"no session: {exc}")
    except StudioError as exc:
        return SmokeCheck("omni", False, f"session refused: {exc}")
    return _omni_outcome(conv, out_dir, audio.seconds, source)


def _omni_outcome(conv: Any, out_dir: Path, audio_s: float, source: str) -> SmokeCheck:
    """The omni check's verdict on the one-turn conversation `conv` (services.converse.timeline.Conversation)."""
    turn = conv.turns[0] if conv.turns else None
    agent_bytes = sum(len(pcm) for _, pcm, _ in conv.agent)
    path, saved = out_dir / OMNI_FILE, None
    if conv.person:
        path.write_bytes(conv.stereo_wav())  # kept even when the check fails: what was said and what came back
        saved = path
    figures: dict[str, Any] = {"source": source, "audio_s": round(audio_s, 3), "agent_audio_bytes": agent_bytes}
    if turn is not None:
        figures |= {k: v for k, v in turn.as_json().items() if k in (
            "user_text", "reply_text", "transcript_final_s", "reply_first_token_s", "first_audio_s",
            "voice_to_voice_ms", "error")}
    if turn is None or not turn.user_text:
        why = turn.error if turn is not None and turn.error else f"no words heard in {audio_s:.1f} s of {source}"
        return SmokeCheck("omni", False, f"no transcript: {why}", saved, agent_bytes, figures=figures)
    if agent_bytes <= MIN_AUDIO_BYTES:
        got = f"the reply's text came ({turn.reply_text.strip()!r}) but " if turn.reply_text.strip() else ""
        why = f"; {turn.error}" if turn.error else ""
        return SmokeCheck("omni", False, f"no reply audio: heard {turn.user_text!r}; {got}only {agent_bytes} bytes "
                                         f"of the agent's audio (needs more than {MIN_AUDIO_BYTES}){why}",
                          saved, agent_bytes, figures=figures)
    if turn.error:
        return SmokeCheck("omni", False, f"reply cut short after {agent_bytes} bytes of the agent's audio: "
                                         f"{turn.error}", saved, agent_bytes, figures=figures)
    reply = f"replied {turn.reply_text.strip()!r}" if turn.reply_text.strip() else "replied (no transcript of it)"
    return SmokeCheck("omni", True, f"one turn from {source}: heard {turn.user_text!r}, {reply} with {agent_bytes} "
                                    f"bytes of the agent's audio, voice-to-voice {turn.voice_to_voice_ms:.0f} ms; "
                                    f"saved {path.name}", path, agent_bytes, figures=figures)


def smoke_reference_wav(seconds: float = SMOKE_REFERENCE_SECONDS) -> bytes:
    """A voiced, speech-like reference for the Base (clone) smoke test: a gliding 110–150 Hz pitch, harmonics
    shaped by the formants of an open vowel, four syllables a second, peaks at -6 dBFS; mono 24 kHz WAV.
    Not a person's voice: no recording ships with the studio, and the speaker encoder takes any voiced sound."""
    import numpy as np

    from protocol.limits import PCM_SAMPLE_RATE
    from services.speech import wav_bytes

    t = np.arange(int(seconds * PCM_SAMPLE_RATE)) / PCM_SAMPLE_RATE
    f0 = 130 + 20 * np.sin(2 * np.pi * 0.4 * t)
    phase = 2 * np.pi * np.cumsum(f0) / PCM_SAMPLE_RATE
    signal = np.zeros_like(t)
    for k in range(1, 30):
        freq = k * 130.0
        weight = sum(a * np.exp(-(((freq - f) / bw) ** 2)) for f, bw, a in ((700, 130, 1.0), (1220, 160, 0.6),
                                                                            (2600, 250, 0.25)))
        signal += (weight + 0.02) / k * np.sin(k * phase)
    syllables = np.clip(np.sin(2 * np.pi * 2.0 * t), 0, None) ** 0.6  # four a second, with short gaps
    signal *= syllables
    signal *= 0.5 / np.max(np.abs(signal))
    return wav_bytes((signal * 32767).astype("<i2").tobytes())


def _voice_config(task_type: TaskType | None) -> tuple[dict[str, Any], str]:
    """The session.config fields for the model's task type, and how the detail line names it."""
    if task_type == "VoiceDesign":
        return {"task_type": "VoiceDesign", "instructions": SMOKE_VOICE_DESCRIPTION}, "VoiceDesign (a described voice)"
    if task_type == "Base":
        import base64

        data_url = "data:audio/wav;base64," + base64.b64encode(smoke_reference_wav()).decode("ascii")
        return ({"task_type": "Base", "ref_audio": data_url, "x_vector_only_mode": True},
                f"Base (cloned from a synthetic {SMOKE_REFERENCE_SECONDS:.0f} s reference)")
    if task_type == "CustomVoice":
        return {"task_type": "CustomVoice"}, "CustomVoice (a preset voice)"
    return {}, ""


def smoke_voice(backend: Backend, out_dir: Path, *, timeout_s: float = VOICE_TIMEOUT_S,
                task_type: TaskType | None = None) -> SmokeCheck:
    from protocol.speech import AudioDone, AudioStart, ErrorEvent
    from services.speech import PcmChunk, speech_config

    extra, task_label = _voice_config(task_type)

    seen: dict[str, int] = {"audio.start": 0, "audio.done": 0, "chunks": 0}
    errors: list[str] = []

    async def speak() -> tuple[bytes, dict[str, Any]]:
        session = backend.client("voice").open(speech_config(**extra))
        async with session:
            async for event in session.speak(SMOKE_TEXT):
                if isinstance(event, AudioStart):
                    seen["audio.start"] += 1
                elif isinstance(event, AudioDone):
                    seen["audio.done"] += 1
                elif isinstance(event, PcmChunk):
                    seen["chunks"] += 1
                elif isinstance(event, ErrorEvent):
                    errors.append(event.message)
            return session.wav(), session.snapshot().figures()

    try:
        wav, figures = asyncio.run(asyncio.wait_for(speak(), timeout_s))
    except TimeoutError:
        return SmokeCheck("voice", False, f"no complete utterance from {backend.client('voice').target} within {timeout_s:.0f} s")
    pcm_bytes = int(figures.get("bytes") or 0)
    path = out_dir / VOICE_FILE
    if wav and pcm_bytes:
        path.write_bytes(wav)  # kept even when the check fails: the audio that did arrive
    missing = [m for m in ("audio.start", "audio.done") if not seen[m]]
    problems = []
    if missing:
        problems.append("no " + " and no ".join(missing))
    if pcm_bytes <= MIN_AUDIO_BYTES:
        problems.append(f"only {pcm_bytes} bytes of audio (needs more than {MIN_AUDIO_BYTES})")
    if errors:
        problems.append("server error: " + "; ".join(errors))
    figures = {**figures, **{k.replace(".", "_"): v for k, v in seen.items()}}
    if task_type:
        figures["task_type"] = task_type
        problems = [f"{task_label}: {problems[0]}", *problems[1:]] if problems else problems
    if problems:
        return SmokeCheck("voice", False, ", ".join(problems), path if pcm_bytes else None, pcm_bytes, figures=figures)
    return SmokeCheck("voice", True, (f"{task_label}: " if task_label else "") +
                      f"{seen['chunks']} chunks, {pcm_bytes} bytes of PCM, first audio "
                      f"{figures.get('ttfa_ms')} ms; saved {path.name}", path, pcm_bytes, figures=figures)


def smoke_image(backend: Backend, out_dir: Path) -> tuple[SmokeCheck, bytes | None]:
    from PIL import Image

    from services.images import ImageRequest

    result = backend.client("image").generate(ImageRequest(IMAGE_PROMPT, size="512x512", steps=SMOKE_STEPS, seed=7,
                                                  output_format="png"))
    data = result.image
    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt, size = im.format, im.size
            im.load()
    except Exception as exc:  # Pillow raises many types for bad data
        return SmokeCheck("image", False, f"the image endpoint returned bytes that are not an image ({exc})"), None
    if fmt != "PNG":
        return SmokeCheck("image", False, f"asked for a PNG, got {fmt}"), None
    path = out_dir / IMAGE_FILE
    path.write_bytes(data)
    figures = {"width": size[0], "height": size[1], **result.timings(), "preview": result.preview}
    return SmokeCheck("image", True, f"{size[0]}x{size[1]} PNG, {len(data)} bytes; saved {path.name}", path, len(data),
                      figures=figures), data


def smoke_video(backend: Backend, out_dir: Path, *, reference: bytes | None = None,
                timeout_s: float = VIDEO_TIMEOUT_S) -> SmokeCheck:
    from services.videos import VideoRequest

    request = VideoRequest(VIDEO_PROMPT, steps=SMOKE_STEPS, seed=7, reference=reference,
                           reference_name="smoke image" if reference else None)
    result = backend.client("video").generate(request, timeout_s=timeout_s)  # checks the MP4 (decodes every frame)
    path = out_dir / VIDEO_FILE
    path.write_bytes(result.mp4)
    info = result.info
    figures = {"frames": info.frames, "width": info.width, "height": info.height, "fps": info.fps,
               "codec": info.codec, "steps": SMOKE_STEPS, "smoke_only": True, "body_bytes": result.body_bytes,
               **result.timings()}
    return SmokeCheck("video", True, f"smoke-only ({SMOKE_STEPS} steps): {info.frames} frames {info.width}x{info.height} "
                      f"{info.codec}, {len(result.mp4)} bytes; saved {path.name}", path, len(result.mp4), figures=figures)


# ---------------------------------------------------------------------------------------------------------
def deployment_settings(state: DeploymentState, base: Settings | None = None) -> Settings:
    """Studio settings pointing at the deployment's endpoints (region, names, bucket, prefix, KMS key)."""
    from services.settings import load_settings

    base = base or load_settings()
    return base.with_overrides(**state.studio_settings())


def deployment_backend(state: DeploymentState, base: Settings | None = None) -> Backend:
    """The studio's SageMaker backend (services.sagemaker) pointed at a deployment's endpoints."""
    from services.backend import create_backend

    return create_backend(deployment_settings(state, base))


def endpoint_duplex(state: DeploymentState, settings: Settings) -> SessionOpener | None:
    """The omni endpoint's duplex session over the HTTP/2 bidirectional stream (None: the deployment has none)."""
    from services.converse.sagemaker import EndpointSession, aws_session

    record = state.endpoints.get("omni")
    if record is None:
        return None
    return EndpointSession(aws_session(settings), record.endpoint.name, connect_timeout=settings.connect_timeout_s)


def record_smoke(state: DeploymentState, report: SmokeReport) -> None:
    """Keep each endpoint's last smoke result in the state file (the endpoints page shows it)."""
    from infra.state import utc_now

    with state.lock:
        for check in report.checks:
            if check.role in state.endpoints:
                state.endpoints[check.role].smoke = {"ok": check.ok, "detail": check.detail, "at": utc_now(),
                                                     "path": None if check.path is None else str(check.path)}
    state.save()


def scale_up_note(report: StatusReport, roles: Sequence[Role] | None = None) -> str | None:
    """What a smoke test of `roles` (default: all) costs beyond the banner: each InService endpoint it would
    call at 0 instances (the video endpoint idles there) scales up to one — minutes of waiting and an hourly
    price from then on. None when every endpoint it calls has an instance. The page asks with it; the CLI says it."""
    cold = [e for e in report.endpoints if e.status == "InService" and e.current_instances == 0
            and (not roles or e.role in roles)]
    if not cold:
        return None
    parts = []
    for e in cold:
        price = e.price.usd_per_hour if e.price is not None else None
        cost = f"{usd(price, 'rate')}/hour" if price is not None else "its instance's price (not in the price table)"
        parts.append(f"the {e.role or e.endpoint_name} endpoint ({e.endpoint_name}) runs 0 instances: the smoke "
                     f"test's request scales it up to 1 {e.instance_type or 'instance'}, which bills {cost}")
    text = "; ".join(parts)
    return (text[0].upper() + text[1:] + f". It waits for that instance — about {SCALE_OUT_MINUTES} minutes on "
            "AWS — and the instance bills until autoscaling takes the endpoint back to 0 once no request waits "
            "(15 idle minutes or more).")


def smoke_deployment(state: DeploymentState, out_dir: Path, roles: Sequence[Role] | None = None, *,
                     progress: SmokeProgress | None = None) -> SmokeReport:
    """The smoke test of a deployment through the studio's SageMaker backend, its result kept in the state
    file. Raises StudioError only when the backend cannot be built (the test did not run)."""
    settings = deployment_settings(state)
    backend = deployment_backend(state, settings)
    voice_model = state.spec.voice_model
    voice_task = task_types_for_model(voice_model)[0] if voice_model else None
    try:
        report = run_smoke(backend, out_dir, tuple(roles) if roles else state.spec.roles, progress=progress,
                           voice_task=voice_task, duplex=endpoint_duplex(state, settings))
    finally:
        backend.close()
    record_smoke(state, report)
    return report
