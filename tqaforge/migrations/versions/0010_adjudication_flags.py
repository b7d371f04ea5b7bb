"""Adjudication flags: a finding (suspect gold) that sends an item back to a person, with its evidence.

A new table only; no label, annotation or adjudication is touched. A flag only adds an entry to
the adjudication queue: a person's decision stays final (people outrank machines).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adjudication_flags",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("task_id", sa.String(length=64), sa.ForeignKey("annotation_tasks.id"), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("reference", sa.Text(), nullable=False),
        sa.Column("release", sa.Text()),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("settled_by", sa.String()),
        sa.Column("settled_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_adjudication_flags_task_id", "adjudication_flags", ["task_id"])
    op.create_index("ix_adjudication_flags_status", "adjudication_flags", ["status"])


def downgrade() -> None:
    # Forward-only, like every tqaforge migration (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
