"""The offline voice's scheduler on a deterministic fake synthesiser: a fake clock, and pieces whose audio and
cost follow from their words (no Piper, no real time), so every order below is exact.

What a serving engine owes its listeners: the first piece of every waiting listener before later pieces of
listeners already playing; among playing listeners, whoever runs dry soonest (one far ahead waits); a short
first piece when others are there; all of the text spoken, nothing twice.
"""

from __future__ import annotations

import random

import pytest

from offline import voice
from offline.splitter import CLAUSE, SENTENCE, cut_points, next_piece, split_text
from offline.voice import Playback, Scheduler, Stream

TEXT = ("Eight people press Speak at the same moment. Each of them should hear the first words quickly, "
        "while the rest of the sentence is still being made.")
LONG = TEXT + " A third sentence follows, and then a fourth one ends it."


def audio_s(piece: str) -> float:
    """The fake voice: 0.12 s of edges plus 0.26 s per word."""
    words = len(piece.split())
    return 0.12 + 0.26 * words if words else 0.0


def cost_s(piece: str) -> float:
    """The fake synthesis time: 10 ms per piece plus 6.2 % of its audio (Piper on 2 cores, roughly)."""
    return 0.010 + 0.062 * audio_s(piece)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeInterrupter:
    def __init__(self) -> None:
        self.interrupted = 0

    def begin(self) -> None:
        pass

    def interrupt(self) -> None:
        self.interrupted += 1


def serve(scheduler: Scheduler, clock: Clock) -> tuple[Stream, str]:
    """Take the most urgent request and make its piece on the fake voice; the stream asks for its next piece."""
    taken = scheduler.take()
    assert taken is not None, "nothing was asked"
    request, start, end = taken
    piece = request.stream.text[start:end]
    clock.now += cost_s(piece)
    scheduler.finished(request, start, end, audio_s(piece))
    if request.stream.finished:
        scheduler.close(request.stream)
    else:
        scheduler.ask(request.stream)
    return request.stream, piece


def listener(scheduler: Scheduler, text: str = TEXT, *, streaming: bool = True) -> Stream:
    stream = Stream(text, Playback(streaming=streaming))
    scheduler.open(stream)
    scheduler.ask(stream)
    return stream


def test_alone_the_first_piece_is_the_first_clause_then_whole_sentences() -> None:
    clock = Clock()
    scheduler = Scheduler(clock)
    text = "Hello there, studio. Streaming speech should start at once. Three sentences."
    stream = listener(scheduler, text)
    pieces = [serve(scheduler, clock)[1] for _ in range(4)]
    assert [p.strip() for p in pieces] == ["Hello there,", "studio.", "Streaming speech should start at once.",
                                          "Three sentences."]
    assert "".join(pieces) == text and stream.finished and scheduler.pending() == 0


def test_first_pieces_of_every_waiting_listener_come_before_later_pieces() -> None:
    clock = Clock()
    scheduler = Scheduler(clock)
    playing = listener(scheduler, LONG)
    for _ in range(2):  # it plays, several seconds ahead of its playback
        serve(scheduler, clock)
    assert playing.playback.ahead(clock.now) > 1.0
    arrivals = [listener(scheduler) for _ in range(4)]
    served = [serve(scheduler, clock)[0] for _ in range(4)]
    assert served == arrivals, "each newcomer's first piece, in arrival order, before the playing listener's next"
    # A busy engine makes first pieces short: a few words, cut at a word boundary.
    for stream in arrivals:
        spoken = stream.text[: stream.pos]
        assert 1 <= len(spoken.split()) <= voice.FIRST_PIECE_WORDS[1] and stream.text.startswith(spoken)


def test_a_listener_far_ahead_of_playback_waits_for_one_about_to_run_dry() -> None:
    clock = Clock()
    scheduler = Scheduler(clock)
    ahead = Stream(TEXT, Playback())
    short = Stream(TEXT, Playback())
    for stream, seconds in ((ahead, 10.0), (short, 0.3)):
        stream.playback.started, stream.playback.audio_s, stream.playback.words = 0.0, seconds, 1
        stream.pos = len("Eight")
        scheduler.open(stream)
    scheduler.ask(ahead)  # asked first, but 10 s of audio are still to play
    scheduler.ask(short)
    assert serve(scheduler, clock)[0] is short
    # A newcomer's first piece goes before the listener that is far ahead, and so do the next pieces of the
    # others while they have less buffered than it.
    newcomer = listener(scheduler)
    assert serve(scheduler, clock)[0] is newcomer
    for _ in range(2):
        assert serve(scheduler, clock)[0] is not ahead
    assert ahead.pos == len("Eight")


def test_a_listener_about_to_run_dry_goes_before_a_newcomer() -> None:
    clock = Clock()
    scheduler = Scheduler(clock)
    playing = Stream(TEXT, Playback())
    playing.playback.started, playing.playback.audio_s, playing.playback.words = 0.0, 0.4, 1
    playing.pos = len("Eight")
    scheduler.open(playing)
    clock.now = 0.2  # 0.2 s of audio left: less than the guard
    scheduler.ask(playing)
    newcomer = listener(scheduler)
    assert serve(scheduler, clock)[0] is playing
    assert serve(scheduler, clock)[0] is newcomer


def test_whole_files_yield_to_listeners_but_are_not_starved() -> None:
    clock = Clock()
    scheduler = Scheduler(clock)
    file = listener(scheduler, streaming=False)
    clock.now = 0.5
    first = listener(scheduler, "Hello.")
    assert serve(scheduler, clock)[0] is first  # a listener waiting for first audio goes first
    # The file asked at 0; it goes before a newcomer asking more than FILE_SLACK_S after it.
    clock.now = 0.01 + voice.FILE_SLACK_S
    late = listener(scheduler)
    assert [serve(scheduler, clock)[0] for _ in range(2)] == [file, late]
    assert file.text[: file.pos].strip() == split_text(TEXT, "sentence")[0]  # files: whole sentences


def test_a_piece_cut_for_an_idle_engine_is_interrupted_by_a_newcomer_and_cut_again() -> None:
    clock = Clock()
    interrupter = FakeInterrupter()
    scheduler = Scheduler(clock, interrupter=interrupter)
    first = listener(scheduler)
    request, start, end = scheduler.take()
    assert first.text[start:end].strip() == "Eight people press Speak at the same moment."  # alone: a whole clause
    second = listener(scheduler)
    assert interrupter.interrupted == 1
    scheduler.requeue(request, start)  # what the worker does when the run stops
    assert first.pos == 0
    served = [serve(scheduler, clock) for _ in range(2)]
    assert [s for s, _ in served] == [first, second]  # the interrupted one keeps its place in line
    assert all(len(piece.split()) <= voice.FIRST_PIECE_WORDS[1] for _, piece in served)  # both short now
    # A piece cut while the engine is busy is never interrupted.
    taken = scheduler.take()
    listener(scheduler)
    assert interrupter.interrupted == 1
    scheduler.finished(*taken, 0.5)


def simulate(n: int, seed: int) -> list[dict]:
    """n listeners arriving within 20 ms, each speaking TEXT as clause units one after another (as a WebSocket
    session does), on the fake voice; arrivals during a piece interrupt it as the worker would."""
    rnd = random.Random(seed)
    clock = Clock()
    interrupter = FakeInterrupter()
    scheduler = Scheduler(clock, interrupter=interrupter)
    units = split_text(TEXT, "clause")
    people = [{"arrive": t, "unit": 0, "playback": Playback(lasting=True), "stream": None, "got": [], "spoken": []}
              for t in sorted(rnd.uniform(0, 0.02) for _ in range(n))]
    due = [(p["arrive"], p) for p in people]

    def open_unit(person: dict) -> None:
        person["stream"] = Stream(units[person["unit"]], person["playback"])
        scheduler.open(person["stream"])
        scheduler.ask(person["stream"])

    while True:
        due.sort(key=lambda d: d[0])
        while due and due[0][0] <= clock.now:
            open_unit(due.pop(0)[1])
        taken = scheduler.take()
        if taken is None:
            if not due:
                break
            clock.now = due[0][0]
            continue
        request, start, end = taken
        piece = request.stream.text[start:end]
        done_at = clock.now + cost_s(piece)
        seen = interrupter.interrupted
        while due and due[0][0] < done_at and interrupter.interrupted == seen:
            at, person = due.pop(0)
            clock.now = at
            open_unit(person)
        if interrupter.interrupted != seen:
            clock.now += 0.004  # the run stops at its next node
            scheduler.requeue(request, start)
            continue
        clock.now = done_at
        scheduler.finished(request, start, end, audio_s(piece))
        person = next(p for p in people if p["stream"] is request.stream)
        person["got"].append((clock.now, audio_s(piece)))
        person["spoken"].append(piece)
        if not request.stream.finished:
            scheduler.ask(request.stream)
            continue
        scheduler.close(request.stream)
        person["unit"] += 1
        if person["unit"] < len(units):
            due.append((clock.now + 0.002, person))
        else:
            person["playback"].close()
    return people


@pytest.mark.parametrize("seed", range(4))
def test_eight_listeners_all_hear_all_their_text_without_gaps(seed: int) -> None:
    people = simulate(8, seed)
    units = split_text(TEXT, "clause")
    for person in people:
        # Coverage: the pieces of each unit join back to the unit, byte for byte.
        joined, spoken = "", list(person["spoken"])
        for unit in units:
            text = ""
            while text != unit:
                assert spoken, "a unit was not fully spoken"
                text += spoken.pop(0)
                assert unit.startswith(text), "a piece was spoken twice or out of order"
            joined += text
        assert not spoken
        # Continuity on the fake voice: every piece arrives before the audio before it has played out.
        start, heard = person["got"][0][0], 0.0
        for at, seconds in person["got"]:
            assert at <= start + heard or heard == 0.0, (person["arrive"], person["got"])
            heard += seconds
    alone = simulate(1, seed)[0]
    first_audio = [p["got"][0][0] - p["arrive"] for p in people]
    assert max(first_audio) <= 2.0 * (alone["got"][0][0] - alone["arrive"])


@pytest.mark.parametrize("seed", range(30))
def test_any_cuts_tile_the_text(seed: int) -> None:
    rnd = random.Random(seed)
    words = ["Dr.", "Smith", "paid", "3.14", "dollars,", "i.e.", "nothing.", "No.", "5", "is", "J.", "R.",
             "Tolkien", "—", "a", "writer;", "the", "end!", "你好，世界。", "and", "then", "at", "\u200b", "over"]
    text = (" " * rnd.randint(0, 2)) + " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 40)))
    text += " " * rnd.randint(0, 2)
    cuts = cut_points(text)
    assert cuts[-1].end == len(text) and cuts[-1].strength == SENTENCE
    pos, pieces = 0, []
    while pos < len(text):
        end = next_piece(cuts, pos, min_words=rnd.randint(1, 3), max_words=rnd.choice([None, 1, 2, 5]),
                         min_strength=rnd.choice([0, CLAUSE, SENTENCE]), prefer=rnd.choice(["short", "long"]))
        assert end > pos
        pieces.append(text[pos:end])
        pos = end
    assert "".join(pieces) == text
    for cut in cuts[:-1]:  # never inside a number, nor after an abbreviation or before the number "No." needs
        before, after = text[: cut.end], text[cut.end :].lstrip(" ​")
        assert not before.endswith(("Dr.", "J.", "R.", "i.e.", "3")), (before, after)
        assert not (before.endswith("No.") and after.startswith("5")), (before, after)


def test_cuts_prefer_natural_boundaries() -> None:
    text = "Eight people press Speak at the same moment."
    cuts = cut_points(text)
    # Three words at most: no clause or phrase boundary in reach, so the first word boundary.
    assert text[: next_piece(cuts, 0, max_words=3)] == "Eight"
    # Four allowed: before "at", where a phrase starts.
    assert text[: next_piece(cuts, 0, min_words=2, max_words=4)] == "Eight people press Speak"
    # Never right after "at" or "the" when a better cut is in reach.
    end = next_piece(cuts, len("Eight people press Speak"), min_words=1, max_words=3, prefer="long")
    assert text[len("Eight people press Speak"): end] == " at the same"
    hello = "Hello there, studio."
    assert hello[: next_piece(cut_points(hello), 0, min_strength=CLAUSE, rank=False)] == "Hello there,"
    assert hello[: next_piece(cut_points(hello), 0, min_strength=CLAUSE)] == "Hello there, studio."


def test_a_second_worker_is_wanted_only_while_the_first_makes_a_piece_for_one_of_several() -> None:
    clock = Clock()
    scheduler = Scheduler(clock)
    first = listener(scheduler)
    assert not scheduler.wanted()  # nothing is being made (the first worker is free, or held)
    taken = scheduler.take(0)
    assert not scheduler.wanted()  # one listener, nothing else asked
    second = listener(scheduler)
    assert scheduler.wanted() and scheduler.parallel(0)
    assert scheduler.take(1, busy_only=True)[0].stream is second
    scheduler.finished(*taken, 0.5)
    assert not scheduler.wanted()
    # With only one listener left, the second worker takes nothing: one 2-thread worker serves it best.
    scheduler.close(second)
    scheduler.ask(first)
    assert scheduler.take(1, busy_only=True) is None and scheduler.take(0)[0].stream is first
