"""The Listen page's views: a recording transcribed (as a file, or streamed at real time with the partial text
growing), the result with its figures, word error rate and downloads, "Speak this", and the transcripts kept in
the history (services/history/transcripts.py) — this person's and those the team shared, with the recording
beside each, as the Voice page keeps its takes."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from services.history import TranscriptRecord
from services.listen import ListenAudio, Segment, Transcript, WerCounts, load_audio, wer_counts
from ui import resources
from ui.code_views import code_panel
from ui.item_links import linked_first, record_link
from ui.text import plain
from ui.workspace_views import kept_list, share_toggle

VOICE_PAGE, LISTEN_PAGE = "pages/voice.py", "pages/listen.py"
POLL_S = 0.2
WER_WAY = ("after lower-casing, numbers written as words and punctuation removed, on both texts "
           "(docs/listen.md, “Word error rate”)")


@dataclass
class Heard:
    """One transcript of this browser session: what came back, where from, its WER and its id once kept."""

    transcript: Transcript
    backend: str
    source: str
    wer: WerCounts | None = None
    reference: str | None = None
    record_id: str | None = None

    def figures(self) -> dict[str, Any]:
        return self.transcript.figures(backend=self.backend, wer=None if self.wer is None else self.wer.wer)


def transcribe(backend: Any, name: str, data: bytes, *, stream: bool) -> tuple[ListenAudio, Transcript]:
    """The uploaded recording checked and transcribed, with a progress bar (and, streamed, the partial text
    growing under it). Raises StudioError with a one-line reason."""
    bar = st.progress(0.0, text=f"Reading {name}…")
    audio = load_audio(data, name)
    listener, loop = backend.client("listen"), resources.loop()
    where = listener.target  # the listen endpoint (or server) alone: not every endpoint of the backend
    if not stream:
        bar.progress(0.3, text=f"{name} read ({audio.seconds:.1f} s of audio): transcribing on {where}…")
        transcript = loop.run(listener.transcribe_file(audio))
        bar.progress(1.0, text=f"Transcribed on {where}")
        return audio, transcript
    partial = [""]
    box = st.empty()
    future = loop.submit(listener.stream(audio, on_partial=lambda text: partial.__setitem__(0, text)))
    started = time.monotonic()
    while not future.done():
        sent = min(audio.seconds, time.monotonic() - started)
        bar.progress(sent / audio.seconds, text=f"Streaming at real time: {sent:.1f} of {audio.seconds:.1f} s sent")
        box.markdown(f"**Hearing…** {plain(partial[0])}" if partial[0] else "**Hearing…**")
        time.sleep(POLL_S)
    transcript = future.result()
    bar.progress(1.0, text=f"Streamed to {where}: the final text is in")
    box.empty()
    return audio, transcript


def heard_of(transcript: Transcript, backend: str, source: str, reference: str) -> tuple[Heard, str | None]:
    """The transcript with its WER against `reference` (none when blank), and why a reference given could not be
    compared (one in another script, one without words) — the transcript stands either way."""
    wer, problem = None, None
    if reference.strip():
        try:
            wer = wer_counts(reference, transcript.text)
        except InvalidInput as exc:
            problem = f"No word error rate: {exc}"
    return Heard(transcript, backend, source, wer, reference.strip() or None), problem


def keep(heard: Heard, audio: bytes | None, audio_name: str) -> str | None:
    """Keep `heard` in this person's history with its recording; the reason when it cannot be (it still shows)."""
    t = heard.transcript
    figures = {k: v for k, v in heard.figures().items() if k not in ("text", "segments")}
    try:
        record = resources.history().transcripts.record(
            t.text, source=heard.source, route=t.route, model=t.model, backend=heard.backend, target=t.target,
            segments=[s.as_json() for s in t.segments], figures=figures,
            reference=heard.reference, preview=t.preview, audio=audio, audio_name=audio_name)
    except StudioError as exc:
        return f"This transcript shows here but could not be kept in the history: {exc}"
    heard.record_id = record.id
    return None


def wer_line(wer: WerCounts) -> str:
    return (f"WER {wer.wer:.1%} = ({wer.substitutions} substituted + {wer.deletions} deleted + {wer.insertions} "
            f"inserted) / {wer.reference_words} reference words, {WER_WAY}")


def metrics(f: dict[str, Any]) -> None:
    """The figures: audio, RTF and — streamed — first partial, final and partials; WER when measured."""
    shown = [("Audio", f"{f['audio_s']:.2f} s", "the recording's length"),
             ("RTF", "—" if f["rtf"] is None else f"{f['rtf']:.3f}",
              "real-time factor: time taken per second of audio (a stream paced at real time sits at about 1)")]
    if "partials" in f:
        first = "—" if f["first_partial_ms"] is None else f"{f['first_partial_ms']:.0f} ms"
        shown += [("First partial", first, "from the first audio sent to the first words back"),
                  ("Final", "—" if f["final_ms"] is None else f"{f['final_ms']:.0f} ms",
                   "from the last audio sent to the final text"),
                  ("Partials", str(f["partials"]), "how many times the text grew")]
    if f.get("wer") is not None:
        shown.append(("WER", f"{f['wer']:.1%}", "word error rate against the reference text"))
    for col, (label, value, help_) in zip(st.columns(len(shown)), shown, strict=True):
        col.metric(label, value, help=help_)


SUBTITLES_HELP = ("A stream gives the words, not when they were said: this hears the kept recording again as a file "
                  "on the current target for its times, and keeps them. The subtitles' words are then the file "
                  "route's, which may differ a little from the streamed text.")


def subtitle_times(listener: Any, record_id: str | None, t: Transcript, key: str) -> Transcript:
    """A streamed transcript kept with its recording has no cue times: "Time for subtitles" hears the recording as
    a file (`listener.transcribe_file`) and keeps its segments with the record. `t` with the segments, if any."""
    if t.segments or t.route != "stream" or record_id is None or listener is None:
        return t
    if not st.button("⏱ Time for subtitles", key=key, help=SUBTITLES_HELP):
        return t
    try:
        history = resources.history()
        record = history.transcripts.get(record_id)
        data = record.audio_bytes()
        if not data:
            raise InvalidInput("this transcript's recording was not kept, so it cannot be timed")
        with st.spinner("Hearing the recording as a file for its times…"):
            timed = resources.loop().run(listener.transcribe_file(load_audio(data, record.audio or "recording.wav")))
        record = history.transcripts.time_segments(
            record_id, [s.as_json() for s in timed.segments])
    except StudioError as exc:
        st.error(plain(exc))
        return t
    return replace(t, segments=[Segment.of(s) for s in record.segments])


def downloads(t: Transcript, figures: dict[str, Any], stem: str, key: str) -> None:
    """TXT, SRT and VTT (when there are segments), JSON (the figures, as `python -m services listen --json`)."""
    kinds = [(".txt", "text/plain")] + ([(".srt", "application/x-subrip"), (".vtt", "text/vtt")] if t.segments else [])
    kinds.append((".json", "application/json"))
    for col, (suffix, mime) in zip(st.columns(len(kinds)), kinds, strict=True):
        col.download_button(f"Download {suffix[1:].upper()}", t.render(suffix, figures), file_name=stem + suffix,
                            mime=mime, key=f"{key}-{suffix[1:]}", on_click="ignore", width="stretch")


def speak_this(text: str, key: str) -> None:
    """"Speak this": the text onto the Voice page's text box, and there."""
    if st.button("🗣️ Speak this", key=key, help="Put this text on the Voice page"):
        st.session_state["voice_text"] = text
        st.switch_page(VOICE_PAGE)


def result_view(heard: Heard, listener: Any = None) -> None:
    """The latest transcript: the preview note, the text, the figures, the WER, the downloads (with "Time for
    subtitles" for a stream, through `listener`), Speak this."""
    t = heard.transcript
    st.markdown(f"**Transcript** — {plain(heard.source)}")
    if t.preview:
        st.info(plain(t.preview if t.preview.startswith("Offline preview") else f"Offline preview — {t.preview}"), icon="🔖")
    st.text(t.text)
    figures = heard.figures()
    metrics(figures)
    if heard.wer is not None:
        st.caption(plain(wer_line(heard.wer)))
    if t.fitting:
        st.caption(plain(t.fitting))
    ran = f"{t.served_by}, standing in for {t.model}," if t.served_by else t.model  # name what actually ran
    st.caption(plain(f"{ran} on {t.target} ({heard.backend}), {'streamed' if t.route == 'stream' else 'as a file'}"))
    t = heard.transcript = subtitle_times(listener, heard.record_id, t, "listen-time-latest")
    downloads(t, heard.figures(), heard.record_id or "transcript", "listen-latest")
    speak_this(t.text, "listen-speak-latest")
    if heard.record_id is not None:
        try:
            history = resources.history()
            kept = history.transcripts.get(heard.record_id)
        except StudioError:
            return  # the list below says what is wrong with the history
        share_toggle(history, "transcript", kept.id, kept.user_id, kept.shared, key_prefix="latest-")
        record_link(LISTEN_PAGE, kept.id)
        code_panel(history, kept.id, key="latest-")


def transcript_of(r: TranscriptRecord) -> Transcript:
    """A kept transcript as the Transcript it was (for its files)."""
    f = r.figures
    audio_s = float(f.get("audio_s") or 0.0)
    return Transcript(text=r.text, route=r.route, audio_s=audio_s, elapsed_s=float(f.get("rtf") or 0.0) * audio_s,
                      model=r.model, target=r.target, preview=r.preview, served_by=f.get("served_by"),
                      partials=int(f.get("partials") or 0),
                      segments=[Segment.of(s) for s in r.segments],
                      first_partial_ms=f.get("first_partial_ms"), final_ms=f.get("final_ms"))


def summary(r: TranscriptRecord) -> str:
    f = r.figures
    parts = [time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at)), r.source,
             "streamed" if r.route == "stream" else "file", f"{float(f.get('audio_s') or 0):.1f} s"]
    if f.get("rtf") is not None:
        parts.append(f"RTF {f['rtf']:.3f}")
    if f.get("wer") is not None:
        parts.append(f"WER {f['wer']:.1%}")
    ran = f"{f['served_by']} for {r.model}" if f.get("served_by") else r.model  # what actually ran
    return " · ".join(parts + [f"{ran} ({r.backend})" + (" — offline preview" if r.preview else "")])


def kept_transcripts(skip: str | None = None, listener: Any = None) -> None:
    """The transcript a link names (`?item=<transcript id>`) first, then the earlier transcripts from the history
    (not `skip`, shown above): each with its summary, the recording, the downloads (and "Time for subtitles",
    through `listener`), Speak this, a link to it, its code and, on one's own, the share toggle."""
    linked_first("transcript", lambda history, record_id: history.transcripts.get(record_id),
                 lambda history, r: _kept_transcript(history, r, listener, "linked-"), key="listen_link_close")
    kept_list("Transcripts", "transcripts", lambda history, n: history.transcripts.list(limit=n),
              lambda history, r: _kept_transcript(history, r, listener), skip)


def _kept_transcript(history: Any, r: TranscriptRecord, listener: Any = None, key_prefix: str = "") -> None:
    st.caption(plain(summary(r)))
    try:
        audio = r.audio_bytes()
    except StudioError as exc:
        st.warning(plain(exc))
    else:
        if audio:
            st.audio(audio)
    t = subtitle_times(listener if history.owns(r) else None, r.id, transcript_of(r),
                       f"{key_prefix}listen-time-{r.id}")
    downloads(t, {"text": r.text, **r.figures, "segments": [s.as_json() for s in t.segments]}, r.id,
              f"{key_prefix}listen-{r.id}")
    speak_this(r.text, f"{key_prefix}listen-speak-{r.id}")
    share_toggle(history, "transcript", r.id, r.user_id, r.shared, key_prefix=key_prefix)
    record_link(LISTEN_PAGE, r.id)
    code_panel(history, r.id, key=key_prefix)
