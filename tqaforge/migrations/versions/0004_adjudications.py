"""Adjudications: the final label of each annotation task, how it was decided and by whom.

A new table only; annotations are untouched (people's work is never lost).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adjudications",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("task_id", sa.String(length=64), sa.ForeignKey("annotation_tasks.id"), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("label", sa.JSON()),
        sa.Column("method", sa.String()),
        sa.Column("decided_by", sa.String()),
        sa.Column("votes", sa.JSON()),
        sa.Column("annotation_ids", sa.JSON()),
        sa.Column("note", sa.Text()),
        sa.Column("history", sa.JSON()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("task_id", name="uq_adjudication_task"),
    )
    op.create_index("ix_adjudications_kind", "adjudications", ["kind"])
    op.create_index("ix_adjudications_status", "adjudications", ["status"])


def downgrade() -> None:
    # Downgrading would drop people's adjudication decisions (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
