"""A kept recording that is gone is said plainly, without the server's data path (issue 31, m4).

A viewer opening the Listen page saw "the recording of transcript … cannot be read at /abs/data/media/…" for a
shared transcript whose file was deleted: the server's folder layout, shown to anyone. The path now goes to the
server's log only. Checked on the real page with AppTest, as a signed-in viewer, against the offline engine.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import StudioError
from services.access import Principal
from services.history import History
from tests.test_demo import _page, webrtc_inert  # noqa: F401  (the fixture, used by name)

BOB = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
VIC = Principal(id="vic@example.com", name="Vic", role="viewer", signed_in=True)


def everything_shown(node: Any) -> Iterator[str]:
    """The text of every element on the page (their protobuf messages, labels and bodies alike), without the
    backslashes of Markdown escapes (a shown path reads `/tmp/pytest\\-of\\-root`)."""
    if getattr(node, "proto", None) is not None:
        yield re.sub(r"\\+", "", str(node.proto))
    for child in getattr(node, "children", {}).values():
        yield from everything_shown(child)


def shared_transcript_without_its_recording(data: Path) -> Path:
    history = History(data).acting_as(BOB)
    kept = history.transcripts.record("the harbour opens at nine", source="talk.wav", route="file", model="m",
                                      backend="server", target="http://x", audio=b"RIFF-bytes", audio_name="talk.wav")
    history.set_shared("transcript", kept.id, True)
    gone = history.media.root / kept.id / kept.audio
    gone.unlink()
    return gone


@pytest.mark.usefixtures("webrtc_inert")
def test_a_viewer_is_told_the_recording_is_missing_without_the_data_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, caplog: pytest.LogCaptureFixture) -> None:
    from ui import auth

    gone = shared_transcript_without_its_recording(tmp_path / "data")
    monkeypatch.setattr(auth, "guard", lambda policy: VIC)
    monkeypatch.setattr(auth, "principal", lambda: VIC)
    with caplog.at_level(logging.WARNING):
        at = _page(monkeypatch, tmp_path, engine_url, "listen.py", None)
    shown = list(everything_shown(at.main)) + list(everything_shown(at.sidebar))
    assert any("the harbour opens at nine" in text for text in shown)  # the shared transcript is there
    assert any("is missing from the studio's media" in w.value for w in at.warning)
    data_dir = str((tmp_path / "data").resolve())
    assert not [text for text in shown if data_dir in text or str(tmp_path) in text]
    # where it was looked for: in the server's log (the file, its record, the media folder)
    assert f"the file {gone.name} of record {gone.parent.name} is missing from {gone.parent.parent}" in caplog.text


def test_the_history_names_no_path_when_a_kept_recording_is_gone(tmp_path: Path) -> None:
    gone = shared_transcript_without_its_recording(tmp_path)
    [record] = History(tmp_path).acting_as(VIC).transcripts.list()
    with pytest.raises(StudioError) as raised:
        record.audio_bytes()
    assert str(tmp_path) not in str(raised.value) and gone.name not in str(raised.value)
