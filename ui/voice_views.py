"""The voice page's views: the figures of an utterance, the last take, and the earlier takes — this person's and
those the team shared, kept in the history (services/history, `history.takes.record`), so they survive reloads and
restarts. Others' takes say whose they are; one's own have the "Share with the team" toggle (ui/workspace_views)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from protocol.speech import SessionConfig
from services.eval.listening import intelligibility_line, take_intelligibility
from services.history import SpeechTake
from services.speech import SessionStats, Utterance, waveform_png
from ui import resources
from ui.code_views import code_panel
from ui.item_links import linked_first, record_link
from ui.text import plain, shorten
from ui.workspace_views import kept_list, share_toggle

VOICE_PAGE = "pages/voice.py"
TEXT_SHOWN = 400  # characters of an utterance's text shown with it
NOT_KEPT = {"type", "ref_audio", "speaker_embedding"}  # a reference recording is never kept with a take
INTEL_KEY = "voice_intel"
INTEL_HELP = ("Each finished take's audio is sent to a recognizer — the backend's listen route when it has one, else "
              "the offline engine's (a stand-in) — and the word error rate of what it heard against the text is "
              "shown and kept with the take.")
STATE_TEXT = {"idle": "connecting…", "streaming": "streaming…", "done": "done", "failed": "stopped by an error",
              "cancelled": "stopped"}


@dataclass
class Take:
    """One finished utterance of this browser session, ready to show again."""

    utterance: Utterance
    wav: bytes
    picture: bytes | None
    voice_label: str | None = None  # what spoke ("voice joe, style …", "clone of a recording"); never the audio
    record_id: str | None = None  # its id in the history, once kept
    intelligibility: dict[str, Any] | None = None  # how a recognizer heard it (services/eval/listening.heard_by)

    @classmethod
    def of(cls, u: Utterance, voice_label: str | None = None) -> Take:
        return cls(u, u.wav(), waveform_png(u.pcm) if u.pcm else None, voice_label)

    @property
    def voice(self) -> str:
        return self.voice_label or f"voice {self.utterance.voice or 'default'}"


def keep_take(u: Utterance, voice_label: str | None, target: str, config: SessionConfig | None) -> Take:
    """The finished utterance as this session's newest take, kept in the history for the signed-in person (with
    the audio that arrived when it failed or was stopped; one with no audio is not kept). When it cannot be kept,
    the page says so once (`voice_error`) and the take still shows for this session."""
    take = Take.of(u, voice_label)
    if not u.pcm:
        return take
    state = "failed" if u.error is not None else ("cancelled" if u.stats.state == "cancelled" else "done")
    numbers = u.stats.figures()
    if st.session_state.get(INTEL_KEY) and state == "done":  # opted in: the audio goes to a recognizer
        with st.spinner("Checking intelligibility…"):
            take.intelligibility = numbers["intelligibility"] = take_intelligibility(resources.backend(), take.wav,
                                                                                     u.text)
    try:
        record = resources.history().takes.record(
            u.text, take.wav, target=target, state=state, error=None if u.error is None else str(u.error),
            voice_label=take.voice, figures=numbers, created_at=u.created_at,
            config={} if config is None else config.model_dump(mode="json", exclude_none=True, exclude=NOT_KEPT))
        take.record_id = record.id
    except StudioError as exc:
        st.session_state["voice_error"] = f"This take plays here but could not be kept in the history: {exc}"
    return take


def intelligibility_toggle(where: Any, offered: bool) -> None:
    """The opt-in, for whoever may speak: off unless asked for, since it sends each take's audio to a recognizer."""
    if offered:
        where.toggle("Check intelligibility", key=INTEL_KEY, help=INTEL_HELP, persist_state="session")


def intelligibility(heard: dict[str, Any] | None) -> None:
    """A take's intelligibility, one line (a warning when the recognizer failed); nothing when it was not checked."""
    if heard is not None:
        (st.warning if "error" in heard else st.caption)(plain(intelligibility_line(heard)))


HEARD_HELP = ("measured in this browser: from your click on Speak to the first sound its player played — after "
              "connecting the player if needed, the network and the browser's jitter buffer")


def figures(stats: SessionStats, heard_ms: float | None = None) -> None:
    """The utterance's figures: the studio's first audio and, beside it, the browser's (`heard_ms`, from
    ui/voice_player `heard_first_audio`)."""
    c = st.columns(6)
    c[0].metric("Chunks", f"{stats.chunks}")
    c[1].metric("Audio bytes", f"{stats.bytes:,}")
    c[2].metric("First audio", "—" if stats.ttfa_ms is None else f"{stats.ttfa_ms:.0f} ms",
                help=f"at the studio: time from sending {stats.ttfa_from} to the first audio chunk received")
    c[3].metric("First audio heard", "—" if heard_ms is None else f"{heard_ms:.0f} ms", help=HEARD_HELP)
    c[4].metric("RTF", "—" if stats.rtf is None else f"{stats.rtf:.3f}",
                help="real-time factor: generation time / audio duration (below 1 is faster than real time)")
    c[5].metric("Audio", f"{stats.audio_seconds:.2f} s")
    st.caption("**First audio** is the studio's: text sent → first audio received from the model. **First audio "
               "heard** is this browser's: click on Speak → first sound its player played, so it also holds the "
               "page's round trip, connecting the player, the network and the browser's jitter buffer (— until "
               "the player has played this utterance).")


def now_speaking(stats: SessionStats, pcm: bytes, heard_ms: float | None = None) -> None:
    """The utterance still streaming: its state, figures (the studio's and the browser's) and the waveform so far."""
    st.markdown(f"**Now speaking** — {STATE_TEXT[stats.state]}")
    figures(stats, heard_ms)
    if pcm:
        st.image(waveform_png(pcm), width="stretch")


def take_view(take: Take, heard_ms: float | None = None) -> None:
    """The last utterance: text, error (the audio before it is kept), figures (with the browser's first audio
    heard), waveform, player, download."""
    u = take.utterance
    st.markdown("**Last utterance**")
    st.text(shorten(u.text, TEXT_SHOWN))
    st.caption(plain(f"Spoken by: {take.voice}"))
    if u.error is not None:
        kept = " The audio received before it is kept below." if u.pcm else ""
        st.error(f"{plain(u.error)}{kept}")
    intelligibility(take.intelligibility)
    figures(u.stats, heard_ms)
    if take.picture:
        st.image(take.picture, caption="Waveform of what was spoken", width="stretch")
        st.audio(take.wav, format="audio/wav")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(u.created_at))
        st.download_button("Download WAV", take.wav, file_name=f"speech-{stamp}.wav", mime="audio/wav",
                           key="voice_download_latest", on_click="ignore")
    if take.record_id is not None:
        try:
            history = resources.history()
            kept = history.takes.get(take.record_id)
        except StudioError:
            return  # the list below says what is wrong with the history
        share_toggle(history, "take", kept.id, kept.user_id, kept.shared)
        record_link(VOICE_PAGE, kept.id)
        code_panel(history, kept.id, key="latest-")


def _summary(t: SpeechTake) -> str:
    f: dict[str, Any] = t.figures
    ttfa = "—" if f.get("ttfa_ms") is None else f"{f['ttfa_ms']:.0f} ms"
    how = {"done": "ok", "failed": "error", "cancelled": "stopped"}[t.state]
    return (f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t.created_at))} · {t.voice_label or 'voice'} · "
            f"{t.config.get('language') or 'Auto'} · {f.get('audio_seconds', 0):.1f} s · first audio {ttfa} · "
            f"{f.get('chunks', 0)} chunks · {how}")


def kept_takes(skip: str | None = None) -> None:
    """The take a link names (`?item=<take id>`) first, then the earlier takes from the history (not `skip`, the
    one shown above): each with its summary, a player, a download, a link to it, its code and, on one's own, the
    share toggle."""
    linked_first("take", lambda history, take_id: history.takes.get(take_id),
                 lambda history, t: _kept_take(history, t, "linked-"), key="voice_link_close")
    kept_list("Takes", "takes", lambda history, n: history.takes.list(limit=n), _kept_take, skip)


def _kept_take(history: Any, t: SpeechTake, key_prefix: str = "") -> None:
    st.caption(plain(_summary(t)))
    intelligibility(t.figures.get("intelligibility"))
    if t.error:
        st.caption(plain(f"Stopped by an error; the audio before it is kept: {t.error}"))
    try:
        wav = t.wav()
    except StudioError as exc:
        st.warning(plain(exc))
    else:
        st.audio(wav, format="audio/wav")
        st.download_button("Download WAV", wav, file_name=f"speech-{t.id.removeprefix('take-')}.wav",
                           mime="audio/wav", key=f"{key_prefix}voice_download_{t.id}", on_click="ignore")
    share_toggle(history, "take", t.id, t.user_id, t.shared, key_prefix=key_prefix)
    record_link(VOICE_PAGE, t.id)
    code_panel(history, t.id, key=key_prefix)
