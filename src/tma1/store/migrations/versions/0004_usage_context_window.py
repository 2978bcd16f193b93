"""usage rows: the model's context window

Design §2.12: context_pressure's threshold is half the model's context window when it is
known (Codex's `token_count` carries `model_context_window`). Nullable: a row without it
falls back to the model's known window or to 100,000.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tma1_messages") as batch:
        batch.add_column(sa.Column("context_window", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tma1_messages") as batch:
        batch.drop_column("context_window")
