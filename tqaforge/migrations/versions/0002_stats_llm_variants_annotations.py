"""Table statistics (backfilled from the stored cells), and the records of the later stages:
LLM calls, answer candidates, variants, annotation tasks, annotations, releases.

Revision ID: 0002
Revises: 0001
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


# --- table statistics, frozen as of this revision ----------------------------------------------
# A copy of what tqaforge.tables (Table.build, table_stats, is_numeric) computed when this
# migration was written, so that replaying it gives the same figures whatever that code becomes:
# a migration imports nothing of tqaforge.

# A number as tables write it: optional sign or accounting parentheses, currency, thousands
# separators, decimals, an optional percent or scale suffix. "$ 1,305", "(5,906)", "65.7%", "-0.3".
_NUMBER = re.compile(
    r"""^\(?\s*[-+\u2212]?\s*[$€£¥]?\s*[-+\u2212]?
        (?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?
        \s*(?:%|k|m|bn|million|billion)?\s*\)?$""",
    re.IGNORECASE | re.VERBOSE,
)
_HAS_DIGIT = re.compile(r"\d")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # spreadsheets hand back 3.0 for the number typed as 3
    return str(value)


def _is_numeric(text: str) -> bool:
    text = text.strip()
    return bool(text) and bool(_HAS_DIGIT.search(text)) and bool(_NUMBER.match(text))


def _stats(table_id: str, header: list[object], rows: list[list[object]]) -> tuple[int, int, float]:
    """``(n_rows, n_cols, numeric_share)``: the share of non-empty cells that read as a number."""
    if not header:
        raise ValueError(f"table {table_id} has no columns")
    filled = numeric = 0
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(
                f"table {table_id}: row {i + 1} has {len(row)} cells but the header has {len(header)} columns"
            )
        for value in row:
            cell = _cell(value)
            if cell.strip():
                filled += 1
                numeric += _is_numeric(cell)
    return len(rows), len(header), (round(numeric / filled, 4) if filled else 0.0)


def _backfill_table_stats() -> None:
    bind = op.get_bind()
    tables = sa.table(
        "tables",
        sa.column("id", sa.String),
        sa.column("header", sa.JSON),
        sa.column("rows", sa.JSON),
        sa.column("n_rows", sa.Integer),
        sa.column("n_cols", sa.Integer),
        sa.column("numeric_share", sa.Float),
    )
    for row in bind.execute(sa.select(tables.c.id, tables.c.header, tables.c.rows)).all():
        n_rows, n_cols, numeric_share = _stats(row.id, row.header, row.rows)
        bind.execute(
            tables.update()
            .where(tables.c.id == row.id)
            .values(n_rows=n_rows, n_cols=n_cols, numeric_share=numeric_share)
        )


def upgrade() -> None:
    with op.batch_alter_table("tables") as batch:
        batch.add_column(sa.Column("n_rows", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("n_cols", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("numeric_share", sa.Float(), nullable=True))
    _backfill_table_stats()
    with op.batch_alter_table("tables") as batch:
        batch.alter_column("n_rows", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("n_cols", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("numeric_share", existing_type=sa.Float(), nullable=False)

    op.create_table(
        "llm_calls",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("endpoint", sa.String()),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON()),
        sa.Column("seed", sa.Integer()),
        sa.Column("sample", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON()),
        sa.Column("text", sa.Text()),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("latency_ms", sa.Float()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("purpose", sa.String()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "answer_candidates",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("question_id", sa.String(length=64), sa.ForeignKey("questions.id"), nullable=False),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("sample", sa.Integer(), nullable=False),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("code", sa.Text()),
        sa.Column("value", sa.Text()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("llm_call_id", sa.String(length=64), sa.ForeignKey("llm_calls.id")),
        sa.Column("model", sa.String()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_answer_candidates_question_id", "answer_candidates", ["question_id"])
    op.create_table(
        "variants",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("question_id", sa.String(length=64), sa.ForeignKey("questions.id"), nullable=False),
        sa.Column("table_id", sa.String(length=64), sa.ForeignKey("tables.id"), nullable=False),
        sa.Column("perturbation", sa.String(), nullable=False),
        sa.Column("params", sa.JSON()),
        sa.Column("seed", sa.Integer()),
        sa.Column("serialization", sa.String()),
        sa.Column("table", sa.JSON()),
        sa.Column("changes", sa.JSON()),
        sa.Column("answer_effect", sa.String()),
        sa.Column("answers", sa.JSON()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("skip_reason", sa.Text()),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_variants_question_id", "variants", ["question_id"])
    op.create_index("ix_variants_status", "variants", ["status"])
    op.create_table(
        "annotation_tasks",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("target_type", sa.String(), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON()),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("ls_project_id", sa.Integer()),
        sa.Column("ls_task_id", sa.Integer()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("kind", "target_type", "target_id", name="uq_task_target"),
    )
    op.create_index("ix_annotation_tasks_status", "annotation_tasks", ["status"])
    op.create_table(
        "annotations",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("task_id", sa.String(length=64), sa.ForeignKey("annotation_tasks.id"), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("label", sa.JSON()),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("source_ref", sa.String(), nullable=False),
        sa.Column("lead_time", sa.Float()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("task_id", "annotator", "source_ref", name="uq_annotation"),
    )
    op.create_index("ix_annotations_task_id", "annotations", ["task_id"])
    op.create_table(
        "releases",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("path", sa.Text()),
        sa.Column("checksum", sa.String()),
        sa.Column("manifest", sa.JSON()),
        sa.Column("frozen", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name", "version", name="uq_release_version"),
    )


def downgrade() -> None:
    # Downgrading would drop people's annotations; tqaforge never does that (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
