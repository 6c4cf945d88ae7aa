"""Alembic's environment for the history: run on the connection the host hands over (migrate.py: inside its write
transaction), or — for `alembic -x url=… upgrade head` by hand — on a connection of its own to that URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from services.history.tables import metadata

connection = context.config.attributes.get("connection")
if connection is not None:
    context.configure(connection=connection, target_metadata=metadata)  # in the host's transaction: none begun
    with context.begin_transaction():
        context.run_migrations()
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option("sqlalchemy.url")
    with create_engine(url).connect() as own:
        context.configure(connection=own, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
