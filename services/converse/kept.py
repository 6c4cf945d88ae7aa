"""A live call kept in the history as it goes, so that a replica's death costs only the call, not what was said.

    kept = KeptCall(history.conversations, live, settings={"mode": "pipeline", ...})   # its row: live, held here
    ...                                          # every second: the turns so far written when they changed; the
                                                 # hold renewed every third of the history's job_lease_s
    record = kept.close(conv, settings={...})    # the call ended: the whole timeline and the stereo WAV kept
    kept.abandon()                               # it ended without a conversation (an error): the turns kept so far

When the process dies mid-call, its hold lapses and the next Converse page on any replica marks the conversation
`cut`, with the turns written before (services/history/conversations.py: `cut_orphans`). Writing is this
thread's, never the call's: a database that is slow or away delays the record, not the agent's voice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.converse.live import LiveConversation
    from services.converse.timeline import Conversation
    from services.history import ConversationRecord, ConversationStore

log = logging.getLogger(__name__)
LOOK_EVERY_S = 1.0  # how often the call's turns are looked at (a turn takes seconds)


class KeptCall:
    """One live call's row in the history, written by a thread of its own while the call goes on."""

    def __init__(self, store: ConversationStore, live: LiveConversation, *, settings: Mapping[str, Any],
                 look_every_s: float = LOOK_EVERY_S) -> None:
        self.store, self.live = store, live
        self.settings = dict(settings)
        self.id = store.open_live(str(settings.get("mode")), settings=self.settings)
        self.problem: str | None = None  # the last write that failed, said by the page
        self.lost = False  # another replica marked it cut while this one could not renew
        self._timeline: dict[str, Any] = {"mode": settings.get("mode"), "turns": []}
        self._look_every_s = min(look_every_s, max(0.2, store.history.job_lease_s / 3))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"kept-{self.id}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        renew_every = max(0.2, self.store.history.job_lease_s / 3)
        renewed = time.monotonic()
        while not self._stop.wait(self._look_every_s):
            try:
                timeline = self.live.view()["timeline"]
                changed = len(timeline.get("turns") or []) != len(self._timeline.get("turns") or [])
                if not changed and time.monotonic() - renewed < renew_every:
                    continue
                held = self.store.keep_live(self.id, timeline if changed else None)
                renewed = time.monotonic()
                if changed:
                    self._timeline = timeline
                self.lost = self.lost or not held
                self.problem = None
            except Exception as exc:  # noqa: BLE001 — the call goes on; the next look tries again
                self.problem = str(exc)
                log.warning("could not keep conversation %s as it goes (tried again in %.0f s): %s", self.id,
                            self._look_every_s, exc)

    def _end(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def close(self, conv: Conversation, *, settings: Mapping[str, Any]) -> ConversationRecord | None:
        """The call ended: its whole timeline, `settings` and stereo WAV kept (None: it had no turns, and is gone)."""
        self._end()
        return self.store.close_live(self.id, conv.as_json(), settings=settings, audio=conv.stereo_wav())

    def abandon(self) -> ConversationRecord | None:
        """The call ended without a conversation to keep (a target's error, a timeout): the turns written so far
        are kept as the conversation (None when there were none)."""
        self._end()
        return self.store.close_live(self.id, self._timeline, settings=self.settings)

    def discard(self) -> None:
        """The call ended with nothing worth keeping (every turn failed): its row is removed."""
        self._end()
        self.store.close_live(self.id, {"mode": self.settings.get("mode"), "turns": []}, settings=self.settings)
