-- What each model round spent, by whom (architecture §5 "Usage and cost"): one row per round,
-- written once, so one budget is counted once across instances.
CREATE TABLE usage (
    id BIGSERIAL PRIMARY KEY,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL DEFAULT '',
    user_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens BIGINT NOT NULL,
    cached_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    estimated INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX usage_by_user ON usage (channel, user_id, created_at);
CREATE INDEX usage_by_chat ON usage (channel, chat_id, created_at);
CREATE INDEX usage_by_time ON usage (created_at);
