"""Label Studio task copies: which annotator's Label Studio project and task hold each annotation task.

A new table only; annotations and tasks are untouched (people's work is never lost).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "labelstudio_task_copies",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("task_id", sa.String(length=64), sa.ForeignKey("annotation_tasks.id"), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("ls_project_id", sa.Integer(), nullable=False),
        sa.Column("ls_task_id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("task_id", "annotator", name="uq_labelstudio_copy"),
    )
    op.create_index("ix_labelstudio_task_copies_task_id", "labelstudio_task_copies", ["task_id"])
    op.create_index("ix_labelstudio_task_copies_kind", "labelstudio_task_copies", ["kind"])
    op.create_index("ix_labelstudio_task_copies_ls_project_id", "labelstudio_task_copies", ["ls_project_id"])


def downgrade() -> None:
    # Forward-only, like every tqaforge migration (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
