"""Answer annotation: candidates keep their answer items and details (SCoT steps, sandbox outcome);
voted answers say where they go next (route).

New nullable columns only; no row is changed or dropped. Candidate status "parse_error" was never
written by any release, and is now spelled "unparsed".

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("answer_candidates", sa.Column("values", sa.JSON()))
    op.add_column("answer_candidates", sa.Column("details", sa.JSON()))
    op.add_column("answers", sa.Column("route", sa.String()))
    op.create_index("ix_answers_route", "answers", ["route"])


def downgrade() -> None:
    # Forward-only, like every tqaforge migration (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
