"""The one error of a clip: what to fix, naming the file, the part or the option."""

from __future__ import annotations

from protocol.errors import InvalidInput


class ClipError(InvalidInput):
    """A clip cannot be made from what was given: a missing or unreadable file (named), a video without a video
    stream, no sound at all, a narration longer than the video without a `fit`. `str(err)` says what to do."""
