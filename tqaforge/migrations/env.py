"""Alembic environment: runs on the connection tqaforge.store hands over.

Migrations are self-contained: neither this file nor a revision imports tqaforge (only alembic
and sqlalchemy), so replaying a revision does the same whatever the live code becomes. Hence no
``target_metadata``: the revisions spell out their tables, and tests/test_store.py checks that
the migrated schema equals the records.
"""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only through tqaforge.store.migrate
    raise RuntimeError("run migrations through tqaforge.store.migrate()")

context.configure(
    connection=connection,
    target_metadata=None,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
