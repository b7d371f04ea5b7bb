"""Annotators: one person, one annotator, whatever the surface (CLI name, app, Label Studio account).

A new table ``annotators`` and a new column ``annotations.annotator_id`` (the person behind the
author string, which stays as written for audit). Every existing label by a person (not an
agent's, not an imported one) is back-filled: each distinct author string becomes one annotator
(id and name: the string itself; alias: the string), so nothing is guessed; ``tqaforge annotators
merge`` joins two that are one person. No annotation is changed but for the new column
(people's work is never lost).

Revision ID: 0008
Revises: 0007
"""

import hashlib
import json
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None



def _id_for(author: str) -> str:
    # The author string itself when it fits the column, else a hash of it (stable either way).
    return author if len(author) <= 64 else "p:" + hashlib.sha256(author.encode()).hexdigest()[:16]


def upgrade() -> None:
    op.create_table(
        "annotators",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("email", sa.String()),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("merged_into", sa.String(length=64)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("annotations") as batch:
        batch.add_column(sa.Column("annotator_id", sa.String(length=64)))
    op.create_index("ix_annotations_annotator_id", "annotations", ["annotator_id"])

    conn = op.get_bind()
    authors = [row[0] for row in conn.execute(sa.text(
        "SELECT DISTINCT annotator FROM annotations WHERE source NOT IN ('agent', 'imported') ORDER BY annotator"
    ))]
    now = datetime.now(timezone.utc)
    annotators = sa.table(
        "annotators", sa.column("id", sa.String), sa.column("name", sa.String), sa.column("email", sa.String),
        sa.column("aliases", sa.JSON), sa.column("merged_into", sa.String), sa.column("created_at", sa.DateTime(timezone=True)),
    )
    for author in authors:
        conn.execute(annotators.insert().values(
            id=_id_for(author), name=author, email=None, aliases=json.loads(json.dumps([author])), merged_into=None,
            created_at=now,
        ))
        conn.execute(
            sa.text("UPDATE annotations SET annotator_id = :id WHERE annotator = :author AND source NOT IN ('agent', 'imported')"),
            {"id": _id_for(author), "author": author},
        )


def downgrade() -> None:
    # Forward-only, like every tqaforge migration (principle 5).
    raise NotImplementedError("tqaforge migrations are forward-only: restore a backup instead")
