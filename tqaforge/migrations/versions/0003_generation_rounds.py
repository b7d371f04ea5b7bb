"""Question generation bookkeeping: rounds (frozen seed pool and routing) and their steps.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "generation_rounds",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("subtype", sa.String(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("seed_pool", sa.JSON(), nullable=False),
        sa.Column("target", sa.Integer(), nullable=False),
        sa.Column("accepted_at_start", sa.Integer(), nullable=False),
        sa.Column("past_target", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subtype", "round", name="uq_generation_round"),
    )
    op.create_table(
        "generation_steps",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("round_id", sa.String(length=64), sa.ForeignKey("generation_rounds.id"), nullable=False),
        sa.Column("table_id", sa.String(length=64), sa.ForeignKey("tables.id"), nullable=False),
        sa.Column("subtype", sa.String(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("params", sa.JSON()),
        sa.Column("seeds_shown", sa.JSON()),
        sa.Column("llm_call_ids", sa.JSON()),
        sa.Column("question_ids", sa.JSON()),
        sa.Column("duplicates", sa.JSON()),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subtype", "round", "table_id", name="uq_generation_step"),
    )
    op.create_index("ix_generation_steps_round_id", "generation_steps", ["round_id"])


def downgrade() -> None:
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
