"""The studio's history: one SQL database — SQLite at <data_dir>/history.sqlite3, or the PostgreSQL server the
`database_url` setting names (docs/storage.md) — with the media files in <data_dir>/media/<record id>/, and a
host over it with one small store per kind of record:

    history = History.of(settings)      # History(data_dir, database_url=…): None is the data folder's SQLite
    history.jobs         # image and video jobs (jobs.py): create, succeed, fail, list, count, rename, delete, recover
    history.voices       # the voices saved for cloning, with their consent (voices.py)
    history.takes        # the Voice page's speech takes and their WAVs (takes.py)
    history.transcripts  # the Listen page's transcripts and their recordings (transcripts.py)
    history.load_reports # load sweeps' reports (load_reports.py)
    history.conversations # Converse's conversations: timeline, settings, stereo WAV (conversations.py)

The host (host.py, which History extends) keeps what the stores share: the connections (db.py: a pool, SQLAlchemy
Core), the one write path (`transaction`: every write one transaction, queued behind the others), the tables
(tables.py: the history's own and those of services/eval, services/audit.py, services/targets.py) and their
migrations (migrate.py, by Alembic), and who sees what.

Every record belongs to the person who made it (`user_id`: services.access.Principal.id) and is theirs alone
until they share it (`shared`, `History.set_shared`). A History acts for one person (`actor`), and so do its
stores:

    mine = history.acting_as(principal)               # a cheap view over the same database and connections
    mine.jobs.create(...)                              # Forbidden unless the role may "generate"; stamped with their id
    mine.jobs.list()                                   # their own records and those others shared, newest first
    mine.set_shared("job", job.id, True)               # only the owner (or an admin) may, with "share"

Without sign-in (`LOCAL`, the command line: `Principal.signed_in` false) one person owns the studio and sees
every record, as before workspaces. A database made before workspaces, or before a later change of its tables,
is migrated when opened, in one transaction (schema.py converts a SQLite file from before Alembic). Jobs survive page reloads and restarts (jobs.py says how
an orphaned job is resumed or marked interrupted).
"""

from __future__ import annotations

from services.access import Principal
from services.history.base import HistoryError, current_owner, owner_alive
from services.history.conversations import ConversationRecord, ConversationStore
from services.history.host import SHAREABLE, Host, Shareable
from services.history.jobs import TITLE_MAX, UNFINISHED, Job, JobKind, JobStatus, JobStore
from services.history.load_reports import LoadReportRecord, LoadReportStore
from services.history.takes import SpeechTake, TakeState, TakeStore
from services.history.transcripts import TranscriptRecord, TranscriptStore
from services.history.voices import VoiceRecord, VoiceStore


class History(Host):
    """The history in `data_dir` (host.py: its connections, transactions, migrations and who sees what), with one
    store per kind of record, each acting for this history's actor (a view's stores act for the view's)."""

    @property
    def jobs(self) -> JobStore:
        """Image and video jobs (the catalog's JOB_KINDS), with their media."""
        return JobStore(self)

    @property
    def voices(self) -> VoiceStore:
        """The voices the studio saved for cloning: who, when, under which consent."""
        return VoiceStore(self)

    @property
    def takes(self) -> TakeStore:
        """The Voice page's speech takes, with their WAVs."""
        return TakeStore(self)

    @property
    def transcripts(self) -> TranscriptStore:
        """The Listen page's transcripts, with their recordings."""
        return TranscriptStore(self)

    @property
    def load_reports(self) -> LoadReportStore:
        """Load sweeps' reports (services/load)."""
        return LoadReportStore(self)

    @property
    def conversations(self) -> ConversationStore:
        """Converse's conversations, with their stereo WAVs."""
        return ConversationStore(self)

    def acting_for_owner(self, job: Job) -> History:
        """A view acting for the person who made `job`, for a background runner carrying it on (a resumed or
        claimed job of any user). It may change that person's jobs, and do nothing that needs a role."""
        if self.owns(job):
            return self
        return self.acting_as(Principal(id=job.user_id, name=job.user_id, role="viewer", signed_in=True))


__all__ = [
    "SHAREABLE", "TITLE_MAX", "UNFINISHED", "ConversationRecord", "ConversationStore", "History", "HistoryError", "Host", "Job", "JobKind", "JobStatus",
    "JobStore", "LoadReportRecord", "LoadReportStore", "Shareable", "SpeechTake", "TakeState", "TakeStore",
    "TranscriptRecord", "TranscriptStore", "VoiceRecord", "VoiceStore", "current_owner", "owner_alive",
]
