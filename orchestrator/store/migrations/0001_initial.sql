-- relaybot's tables (architecture §7, §9). thread_id is '' outside threads.
CREATE TABLE messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    name TEXT,
    provider_items TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX messages_by_thread ON messages (channel, chat_id, thread_id, id);
CREATE INDEX messages_by_time ON messages (created_at);

CREATE TABLE rounds (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    provider TEXT,
    attempts INTEGER NOT NULL,
    ttft_ms DOUBLE PRECISION,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    writes_sent INTEGER NOT NULL,
    finish_reason TEXT,
    outcome TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX rounds_by_time ON rounds (created_at);

CREATE TABLE channel_state (
    channel TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, key)
);

-- The messages waiting for their turn, across instances: ordered by sort_key (the first
-- update id), then id.
CREATE TABLE waiting (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    sort_key BIGINT
);
CREATE INDEX waiting_by_conversation ON waiting (channel, chat_id, thread_id, sort_key, id);

-- An update is taken once: the unique key is the bot's channel and the update id.
CREATE TABLE seen_updates (
    channel TEXT NOT NULL,
    update_id BIGINT NOT NULL,
    seen_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (channel, update_id)
);

-- The last message of each reply being written (its message id), for the instance that
-- takes the conversation over when the writer died.
CREATE TABLE drafts (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    formatted BOOLEAN NOT NULL,
    PRIMARY KEY (channel, chat_id, thread_id)
);
