"""The history's database connection, for SQLite and PostgreSQL alike (SQLAlchemy Core, the psycopg 3 driver).

`engine(url, data_dir)` makes the engine: no URL is SQLite at <data_dir>/history.sqlite3 as before (WAL, a 10 s
busy timeout, and no transaction the driver starts by itself: the host says BEGIN IMMEDIATE for a write and
reads outside any transaction, each seeing the latest commit); `postgresql://…` a pool of psycopg connections,
each pinged before use (`pool_pre_ping`: a restarted server costs no failed request).

The stores speak SQL that both dialects run the same, through `Db.execute(sql, params)`: `?` placeholders in
order (made named binds here, so the driver's own style never shows), or a SQLAlchemy Core statement. Rows
come back as `Row`: by name (`row["id"]`), by position (`row[0]`) and as a tuple.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.sql.elements import TextClause

from services.addresses import parse_database_url

DB_NAME = "history.sqlite3"


def engine(url: str | None, data_dir: Path) -> Engine:
    """The engine of the history: `url`, else SQLite in `data_dir` (which must exist)."""
    parsed = parse_database_url(url) if url else make_url(f"sqlite:///{data_dir / DB_NAME}")
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_pre_ping=True, pool_size=5, max_overflow=10)
    made = create_engine(parsed, connect_args={"timeout": 10.0, "check_same_thread": False},
                         pool_size=5, max_overflow=-1)
    event.listen(made, "connect", _sqlite_connection)
    return made


def _sqlite_connection(dbapi: Any, _record: Any) -> None:
    dbapi.isolation_level = None  # the host begins its transactions itself (BEGIN IMMEDIATE); reads take none
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=10000"):  # NORMAL: durable in WAL
        dbapi.execute(f"PRAGMA {pragma}").fetchall()


def shown(engine_: Engine) -> str:
    """Where the history is, for messages: the SQLite file, or the server's URL without its password."""
    if engine_.dialect.name == "sqlite":
        return str(engine_.url.database)
    return engine_.url.render_as_string(hide_password=True)


class Row(tuple):
    """One row: by column name, by position, or as a tuple (`dict(rows)` of pairs, `a, b = row`)."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        return tuple.__getitem__(self, self._index[key] if isinstance(key, str) else key)

    def keys(self) -> list[str]:
        return list(self._index)


class Result:
    """A statement's rows, fetched whole (the connection goes back to its pool at once), and its row count."""

    def __init__(self, rows: list[Row], rowcount: int) -> None:
        self.rows, self.rowcount = rows, rowcount

    def fetchone(self) -> Row | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Row]:
        return list(self.rows)

    def mappings(self) -> list[dict[str, Any]]:
        return [dict(zip(row.keys(), row, strict=True)) for row in self.rows]

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)


@functools.lru_cache(maxsize=512)
def _named(sql: str) -> tuple[TextClause, int]:
    """`sql` with its `?` placeholders (outside quoted text) as named binds :p0, :p1, …, and how many."""
    parts = sql.split("'")
    count = 0
    for i in range(0, len(parts), 2):  # the even parts are outside quotes
        pieces = parts[i].split("?")
        out = pieces[0]
        for piece in pieces[1:]:
            out += f":p{count}{piece}"
            count += 1
        parts[i] = out
    return text("'".join(parts)), count


def _binds(sql: str, count: int, values: Sequence[Any]) -> dict[str, Any]:
    """The values of `sql`'s `count` `?` placeholders as its named binds."""
    if len(values) != count:
        raise ValueError(f"{count} placeholders, {len(values)} values: {sql}")
    return {f"p{i}": v for i, v in enumerate(values)}


def run(conn: Connection, sql: Any, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Result:
    """Run one statement on `conn`: SQL text with `?` placeholders (or :named ones and a mapping), or a Core
    statement; its rows fetched."""
    if isinstance(sql, str):
        clause, count = _named(sql)
        if isinstance(params, Mapping):
            args: Any = dict(params)
        else:
            args = _binds(sql, count, params or ())
        result = conn.execute(clause, args)
    else:
        result = conn.execute(sql, params) if params is not None else conn.execute(sql)
    if not result.returns_rows:
        return Result([], result.rowcount)
    index = {k: i for i, k in enumerate(result.keys())}
    rows = [Row(tuple(r), index) for r in result.fetchall()]
    return Result(rows, result.rowcount if result.rowcount is not None else len(rows))


class Db:
    """A connection inside one of the host's write transactions (`Host.transaction`)."""

    def __init__(self, conn: Connection) -> None:
        self.connection = conn

    @property
    def dialect(self) -> str:
        return self.connection.dialect.name

    def execute(self, sql: Any, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Result:
        return run(self.connection, sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement for many rows, in one call (SQLAlchemy's executemany: the driver batches them)."""
        if not rows:
            return
        clause, count = _named(sql)
        self.connection.execute(clause, [_binds(sql, count, row) for row in rows])
