"""The source video's packets, read once and kept as they are (the clip copies them; nothing is decoded).

    with open_video(Path("take.mp4")) as video:
        video.packets, video.frames, video.seconds, video.start_s, video.stream (for add_stream_from_template)

The video's length is where its last frame ends minus where its first one starts, in the stream's own time base:
the largest pts plus that packet's duration (the frame interval from the stream's rate when a packet states none),
minus the smallest pts. Any audio the file already has is not read: the clip's track replaces it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from services.clips.errors import ClipError


@dataclass
class SourceVideo:
    """The video stream of an open file and all its packets in file (decode) order."""

    path: Path
    stream: Any = field(repr=False)  # av.VideoStream, the template of the copy
    packets: list[Any] = field(repr=False)  # av.Packet, each with pts, dts and duration in `time_base`
    time_base: Fraction
    start: int  # the first frame's presentation time, in time_base ticks
    end: int  # where the last frame stops being shown, in time_base ticks
    codec: str

    @property
    def frames(self) -> int:
        return len(self.packets)

    @property
    def start_s(self) -> float:
        return float(self.start * self.time_base)

    @property
    def seconds(self) -> float:
        return float((self.end - self.start) * self.time_base)

    def hold_last_frame(self, seconds: float) -> int:
        """Show the last frame `seconds` longer: the last packet in decode order lasts that much more (rounded up
        to the time base), so the file's track ends later. Returns the ticks added. The packet's bytes are not
        touched: the same picture is shown, for longer."""
        ticks = -(-Fraction(seconds) // self.time_base)  # ceil
        if ticks > 0:
            last = self.packets[-1]
            last.duration = int(last.duration or 0) + int(ticks)
            self.end += int(ticks)
        return int(max(ticks, 0))


def _frame_ticks(stream: Any, time_base: Fraction) -> int:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return max(1, round(1 / (Fraction(rate) * time_base))) if rate else 1


@contextmanager
def open_video(path: Path) -> Iterator[SourceVideo]:
    """The video stream of `path` with every packet read; the file stays open while the caller copies them. A
    missing file, one PyAV cannot read, one without a video stream or frames, or frames without timestamps: a
    ClipError naming the file."""
    import av

    path = Path(path)
    if not path.is_file():
        raise ClipError(f"the video {path} does not exist" if not path.exists() else f"the video {path} is not a file")
    try:
        container = av.open(str(path), mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise ClipError(f"the video {path} is not a file PyAV can read ({exc})") from None
    with container:
        if not container.streams.video:
            held = ", ".join(sorted({s.type for s in container.streams})) or "nothing"
            raise ClipError(f"the video {path} has no video stream (it holds {held}): pass the generated MP4")
        stream = container.streams.video[0]
        time_base = stream.time_base
        try:
            packets = [p for p in container.demux(stream) if p.size]
        except (av.error.FFmpegError, ValueError) as exc:
            raise ClipError(f"the video {path} could not be read to its end ({exc})") from None
        if not packets:
            raise ClipError(f"the video {path} has no frames")
        if time_base is None or any(p.pts is None or p.dts is None for p in packets):
            raise ClipError(f"the video {path} has frames without timestamps (a raw stream?): put it in an MP4 "
                            "first")
        step = _frame_ticks(stream, time_base)
        start = min(p.pts for p in packets)
        end = max(p.pts + (p.duration or step) for p in packets)
        yield SourceVideo(path=path, stream=stream, packets=packets, time_base=Fraction(time_base), start=start,
                          end=end, codec=stream.codec_context.name)
