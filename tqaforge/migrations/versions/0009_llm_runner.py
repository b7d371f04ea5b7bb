"""The LLM step runner: budgets shared through the store, work claims, batches, prices on calls.

New tables ``llm_budgets`` and ``llm_budget_holds`` (a budget every worker, process and the app
share), ``work_claims`` (a piece of a step's work taken by one worker under a lease) and
``llm_batches`` (Batch API and offline batch files). ``llm_calls`` gains the price a call was
charged at and its source, the transport and the batch it came from. Existing calls keep their
rows; their price is unknown (NULL), their transport ``online``.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("price_input", sa.Float()))
        batch.add_column(sa.Column("price_output", sa.Float()))
        batch.add_column(sa.Column("price_source", sa.String()))
        batch.add_column(sa.Column("transport", sa.String(), nullable=False, server_default="online"))
        batch.add_column(sa.Column("batch_id", sa.String(length=64)))
    op.create_table(
        "llm_budgets",
        sa.Column("id", sa.String(length=128), primary_key=True),
        sa.Column("max_cost", sa.Float()),
        sa.Column("spent", sa.Float(), nullable=False),
        sa.Column("reserved", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "llm_budget_holds",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("budget_id", sa.String(length=128), nullable=False),
        sa.Column("amount", sa.Float(), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_llm_budget_holds_budget_id", "llm_budget_holds", ["budget_id"])
    op.create_index("ix_llm_budget_holds_owner", "llm_budget_holds", ["owner"])
    op.create_table(
        "work_claims",
        sa.Column("step", sa.String(length=128), primary_key=True),
        sa.Column("piece", sa.String(length=256), primary_key=True),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_work_claims_owner", "work_claims", ["owner"])
    op.create_table(
        "llm_batches",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("step", sa.String()),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("endpoint", sa.String()),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("file_path", sa.Text()),
        sa.Column("file_sha256", sa.String()),
        sa.Column("file_id", sa.String()),
        sa.Column("provider_batch_id", sa.String()),
        sa.Column("output_file_id", sa.String()),
        sa.Column("error_file_id", sa.String()),
        sa.Column("request_count", sa.Integer(), nullable=False),
        sa.Column("custom_ids", sa.JSON(), nullable=False),
        sa.Column("requests", sa.JSON()),
        sa.Column("budget_id", sa.String(length=128)),
        sa.Column("reserved", sa.Float(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("counts", sa.JSON()),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("collected_at", sa.DateTime(timezone=True)),
    )


def downgrade() -> None:
    # Forward-only, like every tqaforge migration (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
