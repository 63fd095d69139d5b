-- The summary that replaces a conversation's compacted turns (architecture §5 "Context budget").
CREATE TABLE summaries (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (channel, chat_id, thread_id)
);
