"""The studio's history: one SQLite file (<data_dir>/history.sqlite3) with the media files beside it
(<data_dir>/media/<record id>/), and a host over it with one small store per kind of record:

    history = History(settings.data_dir)
    history.jobs         # image and video jobs (jobs.py): create, succeed, fail, list, count, rename, delete, recover
    history.voices       # the voices saved for cloning, with their consent (voices.py)
    history.takes        # the Voice page's speech takes and their WAVs (takes.py)
    history.load_reports # load sweeps' reports (load_reports.py)

The host (host.py) keeps what the stores share: the connections (one per thread), the one write path
(`transaction`: every write one BEGIN IMMEDIATE transaction), the tables and their migrations (schema.py; other
packages add theirs with `add_tables`: services/eval, services/audit.py, services/targets.py), and who sees what.

Every record belongs to the person who made it (`user_id`: services.access.Principal.id) and is theirs alone
until they share it (`shared`, `History.set_shared`). A History acts for one person (`actor`), and so do its
stores:

    mine = history.acting_as(principal)               # a cheap view over the same database and connections
    mine.jobs.create(...)                              # Forbidden unless the role may "generate"; stamped with their id
    mine.jobs.list()                                   # their own records and those others shared, newest first
    mine.set_shared("job", job.id, True)               # only the owner (or an admin) may, with "share"

Without sign-in (`LOCAL`, the command line: `Principal.signed_in` false) one person owns the studio and sees
every record, as before workspaces. A database made before workspaces, or before a later change of its tables,
is migrated when opened, each step in one transaction. Jobs survive page reloads and restarts (jobs.py says how
an orphaned job is resumed or marked interrupted).
"""

from services.history.base import HistoryError, current_owner, owner_alive
from services.history.host import SHAREABLE, History, Shareable
from services.history.jobs import TITLE_MAX, UNFINISHED, Job, JobKind, JobStatus, JobStore
from services.history.load_reports import LoadReportRecord, LoadReportStore
from services.history.takes import SpeechTake, TakeState, TakeStore
from services.history.voices import VoiceRecord, VoiceStore

__all__ = [
    "SHAREABLE", "TITLE_MAX", "UNFINISHED", "History", "HistoryError", "Job", "JobKind", "JobStatus", "JobStore",
    "LoadReportRecord", "LoadReportStore", "Shareable", "SpeechTake", "TakeState", "TakeStore", "VoiceRecord",
    "VoiceStore", "current_owner", "owner_alive",
]
