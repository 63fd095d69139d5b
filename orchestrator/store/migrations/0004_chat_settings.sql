-- Per-chat settings (architecture §5 "Chat controls"): the model alias and the system prompt of a
-- chat ('' thread) or of one of its topics/threads, set by /model and /system.
CREATE TABLE chat_settings (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, chat_id, thread_id, key)
);
