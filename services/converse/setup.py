"""`Setup`: one way to hold a conversation, and the one builder of its runners.

    a = Setup(listen=url, speak=url)        # pipeline, the default script, silence window 500 ms
    b = a.changed(silence_ms=700)           # A with what differs (Compare's B)
    conv = await a.runner().run(inputs)     # recorded turns: Pipeline or Native
    live = a.live_runner(playback)          # a live microphone: LivePipeline or LiveNative

It holds what a conversation is held with — the mode, the targets (pipeline: a listen and a speech target, each a
URL or a SageMaker client; native: the server's URL, or a SessionOpener such as a SageMaker omni endpoint's
`EndpointSession`), the reply (a script's text, labelled scripted, or a model at a reply URL or on a SageMaker
endpoint, with its system prompt), the voice, the silence window and the voice detector's threshold and minimum
speech — and builds a fresh runner for each conversation. The Converse page (recorded turns and the live call),
`converse --compare` and `load converse` build theirs here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from hearing.turn_end import TurnDetection
from protocol.errors import InvalidInput
from protocol.limits import Range
from protocol.sagemaker import ENDPOINT_NAME
from services.targets import CHAT
from services.converse.bargein import DEFAULT_MIN_SPEECH_MS, DEFAULT_VAD_THRESHOLD
from services.converse.native import Native
from services.converse.pipeline import Pipeline
from services.converse.reply import ChatReply, ReplyStage, ScriptedReply
from services.converse.script import DEFAULT_SCRIPT, parse_script

MODES = ("pipeline", "native")
SILENCE_MS = Range(200, 2000)  # the silence window that ends a turn
MIN_SPEECH_MS = Range(20, 2000)
# What `--compare KEY=VALUE` may change, and the Setup field it is
CHANGE_KEYS = {"silence-ms": "silence_ms", "mode": "mode", "reply-url": "reply_url", "reply-model": "reply_model",
               "script": "script", "voice": "voice", "system-prompt": "system_prompt",
               "turn-detector": "turn_detector", "eot-threshold": "eot_threshold"}


def _name(target: Any) -> str | None:
    """A target as a person reads it: the URL, or a client's own name for where it goes."""
    if target is None or isinstance(target, str):
        return target
    return str(getattr(target, "target", None) or type(target).__name__)


@dataclass(frozen=True)
class Setup:
    """One way to hold a conversation (see the module's doc). `check()` refuses what cannot run, naming it."""

    mode: str = "pipeline"
    listen: Any = None  # pipeline: a URL, or a listener (a SageMaker listen endpoint's)
    speak: Any = None  # pipeline: a URL, or a speech client (a SageMaker voice endpoint's)
    url: Any = None  # native: the server's URL, or a SessionOpener (a SageMaker omni endpoint's EndpointSession)
    script: str | None = DEFAULT_SCRIPT  # the scripted reply's rules; None: a model at reply_url or reply_endpoint
    script_name: str = "the default script"
    reply_url: str | None = None
    reply_endpoint: str | None = None  # a SageMaker endpoint serving streaming chat ("" : named empty), with `aws`
    aws: Any = None  # the AwsSession reply_endpoint is reached with (services/converse/sagemaker.py)
    reply_model: str | None = None
    system_prompt: str | None = None  # pipeline: the model's; native: the session's instructions (else the script)
    voice: str | None = None
    silence_ms: int = 500
    vad_threshold: float = DEFAULT_VAD_THRESHOLD  # the voice detector's (native: the server VAD's) threshold 0–1
    min_speech_ms: int = DEFAULT_MIN_SPEECH_MS  # shorter speech (a cough) is no turn and interrupts nothing
    # pipeline: how a turn's end is decided (hearing/turn_end.py): the end-of-turn model, or the window
    turn_detector: str = "learned"
    eot_threshold: float = 0.5
    # The studio's closed set for the person holding the conversation (services/targets.py TargetGuard): the reply
    # URL or endpoint is checked against it before any reply stage is built. None: the command line's own.
    guard: Any = None

    def check(self) -> Setup:
        if self.mode not in MODES:
            raise InvalidInput(f"the mode {self.mode!r} is not one: give pipeline or native")
        SILENCE_MS.check("the silence window (ms)", self.silence_ms, hint="the pause that ends a turn")
        if not 0 < self.vad_threshold < 1:
            raise InvalidInput(f"the voice detector's threshold {self.vad_threshold}: give a number between 0 and 1 "
                               "(default 0.5)")
        MIN_SPEECH_MS.check("the minimum speech (ms)", self.min_speech_ms, hint="shorter sounds are not a turn")
        self.detection()
        if self.mode == "pipeline" and (self.listen is None or self.speak is None):
            raise InvalidInput("pipeline mode needs a listen target and a speech target")
        if self.mode == "native" and not self.url:
            raise InvalidInput("native mode needs a server with the speech-to-speech session: its URL, or on "
                               "SageMaker the omni endpoint")
        if self.mode == "pipeline" and self.script is not None and (self.system_prompt or self.reply_model):
            raise InvalidInput("a system prompt and a reply model are for a model at a reply URL or endpoint; a "
                               "script has neither")
        self.reply()
        return self

    def detection(self) -> TurnDetection:
        """The turn detector pipeline mode takes turns by (checked: InvalidInput naming a bad kind or threshold)."""
        return TurnDetection(self.turn_detector, silence_ms=self.silence_ms,  # type: ignore[arg-type]
                             threshold=self.eot_threshold).check()

    def reply(self) -> ReplyStage:
        """A new reply stage (each conversation its own); InvalidInput naming a script's bad line, a bad URL or an
        endpoint name that is not one. Nothing is sent: a reply endpoint's model is looked up by its first reply."""
        if self.script is not None:
            return ScriptedReply(parse_script(self.script, self.script_name))
        if self.reply_endpoint is not None:
            return self._endpoint_reply()
        url = check_reply_url(self.reply_url)
        if self.guard is not None:
            self.guard.check("server", url=url, modality=CHAT, who="the reply")
        return ChatReply(url, model=self.reply_model, system_prompt=self.system_prompt)

    def _endpoint_reply(self) -> ReplyStage:
        from services.converse.sagemaker import EndpointReply

        name = self.reply_endpoint.strip() if self.reply_endpoint else ""
        if not name:
            raise InvalidInput("the reply endpoint's name is empty: name the SageMaker endpoint that serves streaming "
                               "/v1/chat/completions, or choose the scripted reply")
        if not ENDPOINT_NAME.fullmatch(name):
            raise InvalidInput(f"the reply endpoint {name!r} is not a SageMaker endpoint name: letters, digits and "
                               "hyphens, at most 63, starting and ending with a letter or digit")
        if self.aws is None:
            raise InvalidInput("a reply endpoint is reached on the SageMaker backend: choose SageMaker in the sidebar")
        if self.guard is not None:
            self.guard.check("sagemaker", endpoint=name, modality=CHAT, who="the reply")
        return EndpointReply(self.aws, name, model=self.reply_model, system_prompt=self.system_prompt)

    def runner(self) -> Pipeline | Native:
        """A fresh runner for one conversation: `await setup.runner().run(inputs)`."""
        stage = self.reply()  # checked first, also in native mode (its script instructs the session)
        if self.mode == "native":
            assert self.url is not None
            instructions, label = self._native()
            return Native(self.url, instructions=instructions, voice=self.voice, silence_ms=self.silence_ms,
                          reply_label=label, vad_threshold=self.vad_threshold, end_of_turn=self._server_end_of_turn())
        return Pipeline(self.listen, self.speak, stage, voice=self.voice, silence_ms=self.silence_ms,
                        vad_threshold=self.vad_threshold, min_speech_ms=self.min_speech_ms,
                        turn_detection=self.detection())

    def live_runner(self, playback: Any) -> Any:
        """A fresh runner for a live conversation — a microphone in, the agent played through `playback`
        (services/playback.py): LivePipeline or LiveNative, whose `hold(chunks)` holds it."""
        from services.converse.live import LivePipeline
        from services.converse.live_native import LiveNative

        stage = self.reply()
        if self.mode == "native":
            instructions, label = self._native()
            return LiveNative(self.url, playback=playback, instructions=instructions, voice=self.voice,
                              silence_ms=self.silence_ms, reply_label=label, vad_threshold=self.vad_threshold,
                              end_of_turn=self._server_end_of_turn())
        return LivePipeline(self.listen, self.speak, stage, playback=playback, voice=self.voice,
                            silence_ms=self.silence_ms, vad_threshold=self.vad_threshold,
                            min_speech_ms=self.min_speech_ms, turn_detection=self.detection())

    def _server_end_of_turn(self) -> float | None:
        """Native mode: the threshold to ask the server's learned end of turn for (semantic_vad), None for its
        silence window. Only the offline engine has one; a SageMaker endpoint runs vLLM-Omni, which knows
        server_vad only and refuses what it does not know, so it is never asked."""
        if self.turn_detector != "learned" or not isinstance(self.url, str):
            return None
        return self.eot_threshold

    def _native(self) -> tuple[str | None, str]:
        """Native mode: the session's instructions (the system prompt, else the script) and what answers."""
        if self.system_prompt or self.script is None:
            return self.system_prompt, "the server's speech-to-speech session"
        if not isinstance(self.url, str):  # a SageMaker endpoint: a model, instructed with the script
            return self.script, f"the session at {_name(self.url)}, instructed with {self.script_name}"
        return self.script, f"the session's scripted reply at {self.url}, not a model"

    def changed(self, **changes: Any) -> Setup:
        """Setup B: this one with `changes` (field names). A script replaces a model (at a reply URL or endpoint),
        and either of those the script and the other; native mode without a URL of its own talks to the pipeline's
        listen URL, and pipeline mode without targets to the native server. InvalidInput when nothing differs."""
        if changes.get("reply_url"):
            changes.setdefault("script", None)
            changes.setdefault("reply_endpoint", None)
        if changes.get("reply_endpoint") is not None:
            changes.setdefault("script", None)
            changes.setdefault("reply_url", None)
        if changes.get("script") is not None:
            changes.setdefault("reply_url", None)
            changes.setdefault("reply_endpoint", None)
            changes.setdefault("script_name", "B's script")
        new = replace(self, **changes)
        if new.mode == "native" and not new.url and isinstance(new.listen, str):
            new = replace(new, url=new.listen)
        if new.mode == "pipeline" and new.listen is None and new.speak is None and isinstance(new.url, str):
            new = replace(new, listen=new.url, speak=new.url)
        if new == self:
            raise InvalidInput("setup B is the same as A: change at least one setting (e.g. the silence window)")
        return new.check()

    def settings(self) -> dict[str, Any]:
        """What a person reads of it (and the JSON keeps): the targets by name, the reply by its label."""
        out: dict[str, Any] = {"mode": self.mode}
        if self.mode == "native":
            out["url"] = _name(self.url)
        else:
            out |= {"listen": _name(self.listen), "speak": _name(self.speak)}
        try:
            reply = self._native()[1] if self.mode == "native" else self.reply().label
        except InvalidInput as exc:
            reply = f"(not usable: {exc})"
        return out | {"reply": reply, "reply_url": self.reply_url, "reply_endpoint": self.reply_endpoint,
                      "system_prompt": self.system_prompt, "script": self.script, "voice": self.voice,
                      "silence_ms": self.silence_ms, "vad_threshold": self.vad_threshold,
                      "min_speech_ms": self.min_speech_ms, "turn_detector": self.turn_detector,
                      "eot_threshold": self.eot_threshold}


def check_reply_url(url: str | None) -> str:
    """A reply URL: http(s) with a host, else InvalidInput naming what to give (the command line refuses it before
    any work; the studio's pages pick a registered server instead, which its TargetGuard checks again)."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        got = f" (got {url!r})" if url else ""
        raise InvalidInput(f"the reply URL is missing or not http(s)://…{got}: give the server that answers "
                           "/v1/chat/completions, or choose the scripted reply")
    return str(url)


def parse_change(text: str) -> tuple[str, Any]:
    """One `KEY=VALUE` of `--compare` as (Setup field, value): silence-ms a whole number, mode pipeline|native,
    the others text (script: a file's path, read by the caller). InvalidInput naming the keys."""
    key, eq, value = text.partition("=")
    key, value = key.strip().lower(), value.strip()
    keys = ", ".join(CHANGE_KEYS)
    if not eq or key not in CHANGE_KEYS:
        raise InvalidInput(f"--compare {text!r}: write KEY=VALUE with KEY one of {keys} (e.g. silence-ms=700)")
    if not value:
        raise InvalidInput(f"--compare {key}= has no value: give B's {key}")
    field = CHANGE_KEYS[key]
    if field == "silence_ms":
        if not value.isdigit():
            raise InvalidInput(f"--compare silence-ms={value}: give a whole number of milliseconds, e.g. 700")
        return field, int(value)
    if field == "mode" and value not in MODES:
        raise InvalidInput(f"--compare mode={value}: give pipeline or native")
    if field == "turn_detector" and value not in ("learned", "silence"):
        raise InvalidInput(f"--compare turn-detector={value}: give learned or silence")
    if field == "eot_threshold":
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0.0 <= number <= 1.0:
            raise InvalidInput(f"--compare eot-threshold={value}: give a probability from 0 to 1, e.g. 0.7")
        return field, number
    return field, value
