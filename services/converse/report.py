"""One kept conversation as a shareable report: what a product manager pastes into a chat after a demo.

    html = report_html(record)      # a ConversationRecord from history.conversations.get(id)

A single self-contained HTML file — no script, no external resource: its CSS inline, the conversation's stereo
recording (the person left, the agent right) embedded as a base64 WAV in an <audio> player — with the
transcript (both sides, turn by turn), each turn's timeline as the conversation kept it (speech ended, then each
stage's delay after it: the turn decided, the final transcript, the reply's first token, the first audio) and
voice-to-voice p50/p95 with n. The settings a reader needs to judge it (mode, what answered, voice, turn taking)
are named; no server's address is (a report travels further than the studio's users).
"""

from __future__ import annotations

import base64
import html
import re
import time
from typing import Any

from protocol.errors import StudioError

# The stages after the speech ended, in order: (timeline key, the column's heading)
STAGES = (("transcript_final_s", "Final transcript"), ("reply_first_token_s", "First reply token"),
          ("first_audio_s", "First audio received"), ("first_audio_played_s", "First audio played"))
_URL = re.compile(r"\s*\bat https?://\S+")
_CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1f2328}h1{font-size:1.5rem;margin-bottom:.2rem}.meta{color:#59636e;margin:.2rem 0}table{border-collapse:collapse;
width:100%;margin:1rem 0;font-size:.92rem}th,td{border:1px solid #d1d9e0;padding:.35rem .5rem;text-align:left;
vertical-align:top}th{background:#f6f8fa}td.n{text-align:right;white-space:nowrap}.figures{display:flex;gap:2rem;
margin:1rem 0}.figures div{font-size:1.4rem}.figures span{display:block;font-size:.8rem;color:#59636e}.warn{color:#9a6700}
audio{width:100%}footer{color:#59636e;font-size:.8rem;margin-top:2rem}"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} ms"


def _after(turn: dict[str, Any], key: str) -> str:
    end, at = turn.get("user_speech_end_s"), turn.get(key)
    return "—" if end is None or at is None else f"+{(at - end) * 1000:.0f} ms"


def answered_by(settings: dict[str, Any], mode: str) -> str:
    """What answered, without any address: the script, a model (by name), or the server's session."""
    label = str(settings.get("reply") or "")
    if not label:
        if settings.get("reply_url") or settings.get("reply_endpoint"):
            return "a model"
        return "the server's speech-to-speech session" if mode == "native" else "a scripted reply, not a model"
    return _URL.sub("", label).strip() or "a model"


def _settings_line(record: Any) -> str:
    s = record.settings
    parts = [f"{record.mode} mode", f"answered by {answered_by(s, record.mode)}"]
    if s.get("voice"):
        parts.append(f"voice {s['voice']}")
    detector = s.get("turn_detector")
    if detector == "learned":
        parts.append(f"turn taking: the end-of-turn model (threshold {s.get('eot_threshold', 0.5):g}), "
                     f"{s.get('silence_ms', 500)} ms silence window")
    elif s.get("silence_ms"):
        parts.append(f"turn taking: {s['silence_ms']} ms of silence")
    return " · ".join(parts)


def _turn_rows(turns: list[dict[str, Any]]) -> str:
    live = any("first_audio_played_s" in t for t in turns)
    stages = [(k, label) for k, label in STAGES if live or k != "first_audio_played_s"]
    head = ("<tr><th>#</th><th>You said</th><th>The agent said</th><th>Speech ended at</th><th>Turn decided</th>"
            + "".join(f"<th>{label}</th>" for _, label in stages) + "<th>Voice-to-voice</th></tr>")
    rows = []
    for i, t in enumerate(turns, start=1):
        reply = _e(t.get("reply_text") or "")
        if t.get("interrupted"):
            reply += " <em>(interrupted" + (f" after {_ms(t.get('barge_in_stop_ms'))}"
                                            if t.get("barge_in_stop_ms") is not None else "") + ")</em>"
        if t.get("error"):
            reply += f"<div class=\"warn\">This turn failed: {_e(t['error'])}</div>"
        end = t.get("user_speech_end_s")
        decided = "—"
        if t.get("eot_wait_ms") is not None:
            p = t.get("eot_probability")
            decided = f"+{t['eot_wait_ms']:.0f} ms ({_e(t.get('eot_rule'))}" + (f", p {p:.2f}" if p is not None else "") + ")"
        cells = "".join(f"<td class=\"n\">{_after(t, key)}</td>" for key, _ in stages)
        rows.append(f"<tr><td class=\"n\">{i}</td><td>{_e(t.get('user_text') or '…')}</td><td>{reply}</td>"
                    f"<td class=\"n\">{'—' if end is None else f'{end:.2f} s'}</td><td class=\"n\">{decided}</td>"
                    f"{cells}<td class=\"n\">{_ms(t.get('voice_to_voice_ms'))}</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _audio(record: Any) -> str:
    try:
        wav = record.audio_bytes()
    except StudioError as exc:
        return f"<p class=\"warn\">The recording cannot be read: {_e(exc)}</p>"
    if not wav:
        return ("<p class=\"meta\">No recording was kept" + (" (the call was cut off before its end)."
                                                              if record.cut else ".") + "</p>")
    data = base64.b64encode(wav).decode("ascii")
    return ("<p class=\"meta\">The whole conversation — you on the left, the agent on the right:</p>"
            f"<audio controls preload=\"metadata\" src=\"data:audio/wav;base64,{data}\"></audio>")


def report_html(record: Any) -> str:
    """The report of kept conversation `record` (see the module's doc), as one HTML document."""
    turns = record.turns
    v2v = record.timeline.get("voice_to_voice_ms") or {}
    live = any("first_audio_played_s" in t for t in turns)
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at))
    cut = ""
    if record.cut:
        cut = ("<p class=\"warn\">This call was cut off when the studio serving it stopped: the turns said before are "
               "kept.</p>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>Conversation: {_e(record.title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>A conversation with a voice agent</h1><p class=\"meta\">{_e(created)} · {len(turns)} turn"
        f"{'' if len(turns) == 1 else 's'} · {_e(_settings_line(record))}</p>{cut}"
        f"<div class=\"figures\"><div>{_ms(v2v.get('p50'))}<span>voice-to-voice p50</span></div>"
        f"<div>{_ms(v2v.get('p95'))}<span>voice-to-voice p95</span></div>"
        f"<div>{_e(v2v.get('n', 0))}<span>turns measured (n)</span></div></div>"
        f"{_audio(record)}<h2>Turn by turn</h2>{_turn_rows(turns)}"
        "<p class=\"meta\">Times: “speech ended at” is on the conversation's clock (the recording's); the stages are "
        "how long after the speech ended each came. Voice-to-voice: the speech ended → the agent's first audio "
        f"{'played' if live else 'received'}; percentiles by the nearest rank over the turns that have it.</p>"
        f"<footer>Omni Studio · conversation {_e(record.id)}</footer></body></html>\n")
