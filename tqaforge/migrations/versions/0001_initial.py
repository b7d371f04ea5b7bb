"""Initial schema: tables, questions and their answers (the import slice).

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tables",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("header", sa.JSON(), nullable=False),
        sa.Column("rows", sa.JSON(), nullable=False),
        sa.Column("caption", sa.Text()),
        sa.Column("source", sa.Text()),
        sa.Column("licence", sa.String()),
        sa.Column("imported_from", sa.Text()),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "questions",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("table_id", sa.String(length=64), sa.ForeignKey("tables.id"), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("taxonomy", sa.String()),
        sa.Column("qtype", sa.String()),
        sa.Column("subtype", sa.String()),
        sa.Column("question_type", sa.String()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("source", sa.Text()),
        sa.Column("source_id", sa.String()),
        sa.Column("relevant_cells", sa.JSON()),
        sa.Column("lineage", sa.JSON()),
        sa.Column("meta", sa.JSON()),
        sa.Column("round", sa.Integer()),
        sa.Column("seed", sa.Integer()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_questions_table_id", "questions", ["table_id"])
    op.create_index("ix_questions_status", "questions", ["status"])
    op.create_index("ix_questions_subtype_status", "questions", ["subtype", "status"])
    op.create_table(
        "answers",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("question_id", sa.String(length=64), sa.ForeignKey("questions.id"), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("method", sa.String()),
        sa.Column("votes", sa.JSON()),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_answers_question_id", "answers", ["question_id"])
    op.create_index("ix_answers_status", "answers", ["status"])


def downgrade() -> None:
    op.drop_table("answers")
    op.drop_table("questions")
    op.drop_table("tables")
