"""The voice page's views: the figures of an utterance, the last take, and this session's earlier takes."""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from services.speech import SessionStats, Utterance, waveform_png
from ui.resources import plain
from ui.text import shorten

TEXT_SHOWN = 400  # characters of an utterance's text shown with it
STATE_TEXT = {"idle": "connecting…", "streaming": "streaming…", "done": "done", "failed": "stopped by an error",
              "cancelled": "stopped"}


@dataclass
class Take:
    """One finished utterance of this browser session, ready to show again."""

    utterance: Utterance
    wav: bytes
    picture: bytes | None
    voice_label: str | None = None  # what spoke ("voice joe, style …", "clone of a recording"); never the audio

    @classmethod
    def of(cls, u: Utterance, voice_label: str | None = None) -> Take:
        return cls(u, u.wav(), waveform_png(u.pcm) if u.pcm else None, voice_label)

    @property
    def voice(self) -> str:
        return self.voice_label or f"voice {self.utterance.voice or 'default'}"


def figures(stats: SessionStats) -> None:
    c = st.columns(5)
    c[0].metric("Chunks", f"{stats.chunks}")
    c[1].metric("Audio bytes", f"{stats.bytes:,}")
    c[2].metric("First audio", "—" if stats.ttfa_ms is None else f"{stats.ttfa_ms:.0f} ms",
                help=f"time to first audio, measured from {stats.ttfa_from}")
    c[3].metric("RTF", "—" if stats.rtf is None else f"{stats.rtf:.3f}",
                help="real-time factor: generation time / audio duration (below 1 is faster than real time)")
    c[4].metric("Audio", f"{stats.audio_seconds:.2f} s")


def now_speaking(stats: SessionStats, pcm: bytes) -> None:
    """The utterance still streaming: its state, figures and the waveform so far."""
    st.markdown(f"**Now speaking** — {STATE_TEXT[stats.state]}")
    figures(stats)
    if pcm:
        st.image(waveform_png(pcm), width="stretch")


def take_view(take: Take) -> None:
    """The last utterance: text, error (the audio before it is kept), figures, waveform, player, download."""
    u = take.utterance
    st.markdown("**Last utterance**")
    st.text(shorten(u.text, TEXT_SHOWN))
    st.caption(plain(f"Spoken by: {take.voice}"))
    if u.error is not None:
        kept = " The audio received before it is kept below." if u.pcm else ""
        st.error(f"{plain(u.error)}{kept}")
    figures(u.stats)
    if take.picture:
        st.image(take.picture, caption="Waveform of what was spoken", width="stretch")
        st.audio(take.wav, format="audio/wav")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(u.created_at))
        st.download_button("Download WAV", take.wav, file_name=f"speech-{stamp}.wav", mime="audio/wav",
                           key="voice_download_latest", on_click="ignore")


def session_takes(takes: list[Take]) -> None:
    """Earlier takes of this session, newest first, each with its summary and a download."""
    if not takes:
        return
    st.divider()
    st.subheader("This session")
    for i, take in enumerate(takes):
        u = take.utterance
        with st.container(border=True):
            st.text(shorten(u.text, TEXT_SHOWN))
            ttfa = "—" if u.stats.ttfa_ms is None else f"{u.stats.ttfa_ms:.0f} ms"
            st.caption(plain(f"{time.strftime('%H:%M:%S', time.localtime(u.created_at))} · {take.voice} · "
                             f"{u.language or 'Auto'} · {u.stats.audio_seconds:.1f} s · "
                             f"first audio {ttfa} · {u.stats.chunks} chunks · {'ok' if u.ok else 'error'}"))
            if take.picture:
                st.download_button("Download WAV", take.wav, file_name=f"speech-{i + 1}.wav", mime="audio/wav",
                                   key=f"voice_download_{u.created_at}", on_click="ignore")
