"""Label Studio pulls: per project, the server time from which the next pull reads.

A new table only; nothing else changes (people's work is never lost).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "labelstudio_pulls",
        sa.Column("ls_project_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("pulled_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    # Forward-only, like every tqaforge migration (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
