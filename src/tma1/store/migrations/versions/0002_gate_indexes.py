"""indexes for the validation gates

The follow-rate gate looks, per emit, for the next N tool calls (PreToolUse) of the
session, and for test_stuck emits for the failing commands before it. With only
(session_id, ts) each lookup walks every event of the session in between and reads the
row for its event_type; these two indexes turn both into short index range scans.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_FAILURES = sa.text("failure_kind IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_hook_events_session_type_ts",
        "tma1_hook_events",
        ["session_id", "event_type", "ts"],
        unique=False,
    )
    op.create_index(
        "ix_hook_events_session_failures_ts",
        "tma1_hook_events",
        ["session_id", "ts"],
        unique=False,
        sqlite_where=_FAILURES,
        postgresql_where=_FAILURES,
    )


def downgrade() -> None:
    op.drop_index("ix_hook_events_session_failures_ts", table_name="tma1_hook_events")
    op.drop_index("ix_hook_events_session_type_ts", table_name="tma1_hook_events")
