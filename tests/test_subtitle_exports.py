"""SubRip and WebVTT exports of a transcript cannot be steered by the text they carry (issue 31, L4).

A segment's text comes from a server: a blank line and a `-->` line in it used to start a cue of its own, and
`<`/`&` went into WebVTT unescaped. The files are read back here with a small reader of both formats (blocks
split at blank lines; a cue is a block with a timing line), so a cue too many is seen as one.
"""

from __future__ import annotations

import html
import re

import pytest

from protocol.listen import TranscriptionSegment, srt, vtt
from services.listen.transcript import Segment, Transcript

TIMING = re.compile(r"^(\d{2}:\d{2}:\d{2}[.,]\d{3}) --> (\d{2}:\d{2}:\d{2}[.,]\d{3})$")

HOSTILE = [
    Segment(0.0, 1.0, "Hello there."),
    Segment(1.0, 2.0, "ok\n\n99\n00:00:05,000 --> 00:00:09,000\ninjected cue\n\nmore"),
    Segment(2.0, 3.0, "a <b>bold</b> & <v Bob>voice</v> --> arrow\r\n\r\nNOTE hidden\u2028\u2029end"),
    Segment(3.0, 4.0, "\n\n"),
    Segment(4.0, 5.0, "WEBVTT\n\n00:01.000 --> 00:02.000\nx"),
]


def read_cues(text: str, *, webvtt: bool) -> list[tuple[str, str, str]]:
    """(start, end, payload) of every cue in a SubRip or WebVTT file, as a player finds them."""
    blocks = re.split(r"\n{2,}", text.replace("\r\n", "\n").strip("\n"))
    if webvtt:
        assert blocks[0].startswith("WEBVTT")
        blocks = blocks[1:]
    cues = []
    for block in blocks:
        lines = block.split("\n")
        for i, line in enumerate(lines[:2]):
            if (m := TIMING.match(line)):
                cues.append((m.group(1), m.group(2), "\n".join(lines[i + 1 :])))
                break
    return cues


def transcript() -> Transcript:
    return Transcript(text="x", route="file", audio_s=5.0, elapsed_s=1.0, model="m", target="t", segments=HOSTILE)


@pytest.mark.parametrize("suffix", [".srt", ".vtt"])
def test_a_hostile_segment_is_one_cue_with_its_words(suffix: str) -> None:
    out = transcript().render(suffix, {}).decode("utf-8")
    cues = read_cues(out, webvtt=suffix == ".vtt")
    assert len(cues) == len(HOSTILE), out
    sep = "." if suffix == ".vtt" else ","
    assert [c[0] for c in cues] == [f"00:00:0{i}{sep}000" for i in range(len(HOSTILE))]
    for (_, _, payload), segment in zip(cues, HOSTILE, strict=True):
        assert "\n" not in payload and "-->" not in payload
        words = html.unescape(payload) if suffix == ".vtt" else payload
        assert words.split() == segment.text.replace("-->", "->").split()


def test_webvtt_escapes_markup_and_ampersands() -> None:
    out = vtt([TranscriptionSegment(id=0, start=0, end=1, text="a <b>bold</b> & <c.x>cue</c> > z")])
    (_, _, payload), = read_cues(out, webvtt=True)
    assert payload == "a &lt;b&gt;bold&lt;/b&gt; &amp; &lt;c.x&gt;cue&lt;/c&gt; &gt; z"
    assert "<" not in out.split("\n", 1)[1].replace("-->", "")


def test_subrip_keeps_markup_characters_and_numbers_cues_in_order() -> None:
    out = srt([TranscriptionSegment(id=i, start=i, end=i + 1, text=s.text) for i, s in enumerate(HOSTILE)])
    numbers = [block.split("\n")[0] for block in re.split(r"\n{2,}", out.strip("\n"))]
    assert numbers == [str(i) for i in range(1, len(HOSTILE) + 1)]
    assert "a <b>bold</b> & <v Bob>voice</v> -> arrow NOTE hidden end" in out
