"""Alembic environment: runs on the connection tqaforge.store hands over."""

from alembic import context

from tqaforge.schemas.records import SQLModel  # noqa: F401  (registers the metadata)

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only through tqaforge.store.migrate
    raise RuntimeError("run migrations through tqaforge.store.migrate()")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
