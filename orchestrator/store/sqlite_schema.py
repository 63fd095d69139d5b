"""The SQLite store's tables (architecture §7): created when missing; older files gain the
columns added since (:func:`upgrade`, the counterpart of PostgreSQL's numbered migrations in
:mod:`orchestrator.store.migrations`: each change is a new step here and a new file there).

The steps so far: ``thread_id`` on ``messages`` and ``rounds``; ``sort_key`` on ``waiting``;
``message_ids`` and ``reply_to`` on ``drafts`` (migration 0002: every reply in flight is
recorded, from before its first write); the tables ``chat_settings``, ``usage`` and
``rate_counters`` of the chat controls (migrations 0004–0006), created when missing."""

from __future__ import annotations

import sqlite3

__all__ = ["INDEXES", "SCHEMA", "upgrade"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    provider_items TEXT,
    created_at REAL NOT NULL,
    thread_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS rounds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    provider TEXT,
    attempts INTEGER NOT NULL,
    ttft_ms REAL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    writes_sent INTEGER NOT NULL,
    finish_reason TEXT,
    outcome TEXT NOT NULL,
    created_at REAL NOT NULL,
    thread_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS channel_state (
    channel TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, key)
);
CREATE TABLE IF NOT EXISTS waiting (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL,
    received_at REAL NOT NULL,
    sort_key INTEGER
);
CREATE TABLE IF NOT EXISTS seen_updates (
    channel TEXT NOT NULL,
    update_id INTEGER NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (channel, update_id)
);
CREATE TABLE IF NOT EXISTS drafts (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    formatted INTEGER NOT NULL,
    message_ids TEXT NOT NULL DEFAULT '[]',
    reply_to TEXT,
    PRIMARY KEY (channel, chat_id, thread_id)
);
CREATE TABLE IF NOT EXISTS summaries (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    summary TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (channel, chat_id, thread_id)
);
CREATE TABLE IF NOT EXISTS chat_settings (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, chat_id, thread_id, key)
);
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    user_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    estimated INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rate_counters (
    scope TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (scope, window_start)
);
"""
INDEXES = """
CREATE INDEX IF NOT EXISTS messages_by_thread ON messages (channel, chat_id, thread_id, id);
CREATE INDEX IF NOT EXISTS messages_by_time ON messages (created_at);
CREATE INDEX IF NOT EXISTS rounds_by_time ON rounds (created_at);
CREATE INDEX IF NOT EXISTS usage_by_user ON usage (channel, user_id, created_at);
CREATE INDEX IF NOT EXISTS usage_by_chat ON usage (channel, chat_id, created_at);
CREATE INDEX IF NOT EXISTS usage_by_time ON usage (created_at);
"""


def upgrade(db: sqlite3.Connection) -> None:
    """Add the columns a file written by an older version lacks."""
    for table in ("messages", "rounds"):
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if "thread_id" not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN thread_id TEXT NOT NULL DEFAULT ''")
    columns = {row[1] for row in db.execute("PRAGMA table_info(waiting)")}
    if "sort_key" not in columns:
        db.execute("ALTER TABLE waiting ADD COLUMN sort_key INTEGER")
    columns = {row[1] for row in db.execute("PRAGMA table_info(drafts)")}
    if "message_ids" not in columns:
        db.execute("ALTER TABLE drafts ADD COLUMN message_ids TEXT NOT NULL DEFAULT '[]'")
    if "reply_to" not in columns:
        db.execute("ALTER TABLE drafts ADD COLUMN reply_to TEXT")
