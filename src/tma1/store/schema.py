"""Table definitions (design §3). Timestamps are integer epoch milliseconds."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

# SQLite only autoincrements an INTEGER PRIMARY KEY; PostgreSQL wants a BIGINT identity.
_ID_TYPE = BigInteger().with_variant(Integer, "sqlite")


def _pk() -> Column[int]:
    return Column("id", _ID_TYPE, primary_key=True, autoincrement=True)


hook_events = Table(
    "tma1_hook_events",
    metadata,
    _pk(),
    Column("ts", BigInteger, nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("hook_event_name", String(64), nullable=False),
    Column("agent_source", String(32), nullable=False),
    Column("tool_name", String(128)),
    Column("tool_use_id", String(200)),
    Column("tool_input", Text),
    Column("tool_result", Text),
    Column("tool_file_path", Text),
    Column("tool_files", Text),  # JSON list
    Column("tool_command", Text),
    Column("tool_command_prefix", String(255)),
    Column("tool_success", Boolean),
    Column("failure_kind", String(16)),
    Column("tool_error_summary", Text),
    Column("test_ids", Text),  # JSON list
    Column("cwd", Text),
    Column("project", Text),
    Column("transcript_path", Text),
    Column("permission_mode", String(64)),
    Column("duration_ms", BigInteger),
    Column("metadata", Text),  # JSON object: unknown fields, capped
    # Migration 0003 (design §2.15, §2.16): passing tests the output reports, and the
    # sub-agent lane of the event (NULL: the main agent).
    Column("passed_test_ids", Text),  # JSON list
    Column("agent_id", String(200)),
    Column("agent_type", String(200)),
    # Migration 0005 (issue 30): the machine that stored the row (tma1.origin.machine). NULL: a
    # row from before it, of no known machine (read as local on SQLite only).
    Column("machine_id", String(64)),
    Index("ix_hook_events_session_ts", "session_id", "ts"),
    Index("ix_hook_events_project_ts", "project", "ts"),
    Index("ix_hook_events_ts", "ts"),
    # Migration 0002: the follow-rate gate's "next N tool calls" and "failures before".
    Index("ix_hook_events_session_type_ts", "session_id", "event_type", "ts"),
    Index(
        "ix_hook_events_session_failures_ts",
        "session_id",
        "ts",
        sqlite_where=text("failure_kind IS NOT NULL"),
        postgresql_where=text("failure_kind IS NOT NULL"),
    ),
)

external_changes = Table(
    "tma1_external_changes",
    metadata,
    _pk(),
    Column("ts", BigInteger, nullable=False),
    Column("project", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("change", String(16), nullable=False),  # added | modified | deleted
    Column("size", BigInteger),
    Column("content_hash", String(64)),
    Column("writer_session", String(200)),  # NULL: nobody we know
    Column("machine_id", String(64)),  # migration 0005
    Index("ix_external_changes_project_ts", "project", "ts"),
    Index("ix_external_changes_ts", "ts"),
)

messages = Table(
    "tma1_messages",
    metadata,
    _pk(),
    Column("ts", BigInteger, nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("message_id", String(200)),
    Column("kind", String(16), nullable=False, server_default="usage"),  # usage | compaction
    Column("model", String(128)),
    Column("input_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cache_read_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cache_creation_tokens", BigInteger, nullable=False, server_default="0"),
    Column("output_tokens", BigInteger, nullable=False, server_default="0"),
    Column("occupancy", BigInteger, nullable=False, server_default="0"),
    Column("context_window", BigInteger),  # the model's, when the agent reports it
    Column("machine_id", String(64)),  # migration 0005
    Index("ix_messages_session_ts", "session_id", "ts"),
    Index("ix_messages_ts", "ts"),
)

anomaly_emits = Table(
    "tma1_anomaly_emits",
    metadata,
    _pk(),
    Column("ts", BigInteger, nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("channel", String(32), nullable=False),
    Column("evidence", Text, nullable=False),
    Column("suggestion", Text, nullable=False),
    Column("related_files", Text, nullable=False),  # JSON list
    Column("first_emitted_at", BigInteger, nullable=False),
    Column("stable_key", Text, nullable=False),
    Column("machine_id", String(64)),  # migration 0005
    Index("ix_anomaly_emits_ts", "ts"),
    Index("ix_anomaly_emits_session_ts", "session_id", "ts"),
    Index("ix_anomaly_emits_kind_ts", "kind", "ts"),
)


anomaly_labels = Table(
    "tma1_anomaly_labels",
    metadata,
    _pk(),
    Column("emit_id", BigInteger, nullable=False),
    Column("label", String(8), nullable=False),  # tp | fp
    Column("source", String(16), nullable=False, server_default="human"),  # human | agent
    Column("note", Text),
    Column("ts", BigInteger, nullable=False),
    UniqueConstraint("emit_id", "source", name="uq_anomaly_labels_emit_source"),
    Index("ix_anomaly_labels_ts", "ts"),
)

# Migration 0005 (issue 30): each session's repository (the normalised `origin` remote of
# its git top-level, and the path inside it) and its machine, written once per session.
session_repos = Table(
    "tma1_session_repos",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("machine_id", String(64), primary_key=True),
    Column("host", String(255)),
    Column("repo", Text, nullable=False),  # origin URL normalised, or the top-level path
    Column("repo_path", Text, nullable=False, server_default=""),  # "" : the top-level
    Column("ts", BigInteger, nullable=False),
    Index("ix_session_repos_repo", "repo"),
)

# Migration 0005: a project's rows of one machine (the bundle's and attribution's reads
# on a team database, where every devcontainer's project is /workspaces/app). PostgreSQL
# only: a SQLite file is one machine's, its (project, ts) indexes serve, and the hook
# path's insert would pay for an index no read needs.
POSTGRESQL_ONLY_INDEXES = (
    Index(
        "ix_hook_events_machine_project_ts",
        hook_events.c.machine_id,
        hook_events.c.project,
        hook_events.c.ts,
    ).ddl_if(dialect="postgresql"),
    Index(
        "ix_external_changes_machine_project_ts",
        external_changes.c.machine_id,
        external_changes.c.project,
        external_changes.c.ts,
    ).ddl_if(dialect="postgresql"),
)

ALL_TABLES = (hook_events, external_changes, messages, anomaly_emits, anomaly_labels)

# Bounded columns (String(n)): PostgreSQL refuses a longer value where SQLite would keep it.
HOOK_EVENT_LIMITS: dict[str, int] = {
    c.name: c.type.length
    for c in hook_events.columns
    if isinstance(c.type, String) and not isinstance(c.type, Text) and c.type.length
}
