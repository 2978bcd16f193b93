"""machine identity and session repositories (issue 30: a team on one PostgreSQL)

Every stored row names the machine that stored it (`tma1.origin.machine`), so the reads that
decide what to tell an agent read only their own machine's rows. Rows from before this
migration keep NULL: on a team database several machines upgrade, and none of them can
tell whose those rows were. The store reads NULL as "this machine" on SQLite only (a
SQLite file lives in one machine's data dir); on PostgreSQL they belong to no machine's
agent and show only in the team scope.

`tma1_session_repos`: each session's repository (normalised `origin` remote + the path
inside it), written once per session, for the team scope's grouping.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_TABLES = ("tma1_hook_events", "tma1_external_changes", "tma1_messages", "tma1_anomaly_emits")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("machine_id", sa.String(64), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "ix_hook_events_machine_project_ts",
            "tma1_hook_events",
            ["machine_id", "project", "ts"],
        )
        op.create_index(
            "ix_external_changes_machine_project_ts",
            "tma1_external_changes",
            ["machine_id", "project", "ts"],
        )
    op.create_table(
        "tma1_session_repos",
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("machine_id", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("repo", sa.Text(), nullable=False),
        sa.Column("repo_path", sa.Text(), nullable=False, server_default=""),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "machine_id"),
    )
    op.create_index("ix_session_repos_repo", "tma1_session_repos", ["repo"])


def downgrade() -> None:
    op.drop_index("ix_session_repos_repo", table_name="tma1_session_repos")
    op.drop_table("tma1_session_repos")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_external_changes_machine_project_ts", table_name="tma1_external_changes")
        op.drop_index("ix_hook_events_machine_project_ts", table_name="tma1_hook_events")
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("machine_id")
