"""The history's database connection (services/history/db.py): a bad or unreachable database_url is one line
naming the setting and never the password, and PostgreSQL connections a server dropped are replaced before use
(pool_pre_ping), so a restarted server costs no failed request."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.pg_cluster import Cluster
from services.history import History, HistoryError


def test_a_bad_database_url_given_to_the_history_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"^the database_url setting \(OMNI_STUDIO_DATABASE_URL\): .*not mysql://"):
        History(tmp_path, database_url="mysql://me:secret@db/omni")


def test_an_unreachable_server_is_named_without_its_password(tmp_path: Path) -> None:
    with pytest.raises(HistoryError) as caught:
        History(tmp_path, database_url="postgresql://studio:hunter2@127.0.0.1:9/omni?connect_timeout=2")
    message = str(caught.value)
    assert message.startswith("cannot open the history at postgresql+psycopg://studio:***@127.0.0.1:9/omni")
    assert "OMNI_STUDIO_DATABASE_URL" in message and "hunter2" not in message and "\n" not in message


def test_connections_the_server_dropped_are_replaced_before_use(tmp_path: Path, pg_cluster: Cluster) -> None:
    name = pg_cluster.database()
    try:
        h = History(tmp_path, database_url=pg_cluster.url(name))
        job = h.jobs.create("image", "before", {}, target="t")  # the pool now holds a connection
        pg_cluster.admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                                 (name,))
        assert [j.id for j in h.jobs.list()] == [job.id]  # a dead connection is pinged, dropped and replaced
        assert h.jobs.create("image", "after", {}, target="t").prompt == "after"
    finally:
        pg_cluster.drop(name)


def test_a_database_that_refuses_writes_mid_way_keeps_reads_and_leaves_no_file_behind(tmp_path: Path,
                                                                                    pg_cluster: Cluster) -> None:
    """The database goes read-only under a running studio (a failover to a replica, a full disk's protection): each
    write fails naming what was not recorded, where and why; the files written for it are removed again (no media
    without a record); everything already kept still lists and reads."""
    import wave
    from io import BytesIO

    name = pg_cluster.database()
    try:
        h = History(tmp_path, database_url=pg_cluster.url(name))
        kept = h.jobs.create("image", "kept before", {}, target="t", inputs={"reference.png": b"\x89PNG kept"})
        pg_cluster.admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        pg_cluster.admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        wav = BytesIO()
        with wave.open(wav, "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(24_000), w.writeframes(b"\x01\x00" * 2400)
        for write, what in [
            (lambda: h.jobs.create("image", "refused", {}, target="t", inputs={"reference.png": b"\x89PNG new"}),
             "image job"),
            (lambda: h.takes.record("refused", wav.getvalue(), target="t"), "speech take"),
        ]:
            with pytest.raises(HistoryError) as caught:
                write()
            message = str(caught.value)
            assert message.startswith(f"cannot record the {what} in postgresql+psycopg://")
            assert "read-only transaction" in message and "\n" not in message
        media = sorted(p.name for p in (tmp_path / "media").iterdir())
        assert media == [kept.id]  # the refused records' files went again
        assert [j.prompt for j in h.jobs.list()] == ["kept before"]  # reads go on
        assert h.jobs.get(kept.id).read("reference.png") == b"\x89PNG kept"
    finally:
        pg_cluster.admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        pg_cluster.drop(name)
