"""checks and lanes: passing test ids and the sub-agent of each hook event

Design §2.15: a failing test stays open until a later run reports it passing, and a
passing run's output is not kept, so the ids it reports passing are stored with it.
Design §2.16: Claude Code's sub-agent hooks carry `agent_id` and `agent_type`; failure
streaks are counted per lane = (session, agent_id or main). All nullable: old rows are the
main agent's, with nothing reported passing.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tma1_hook_events") as batch:
        batch.add_column(sa.Column("passed_test_ids", sa.Text(), nullable=True))
        batch.add_column(sa.Column("agent_id", sa.String(200), nullable=True))
        batch.add_column(sa.Column("agent_type", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tma1_hook_events") as batch:
        batch.drop_column("agent_type")
        batch.drop_column("agent_id")
        batch.drop_column("passed_test_ids")
