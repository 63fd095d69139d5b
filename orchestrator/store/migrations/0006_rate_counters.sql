-- Messages per minute (architecture §5 "Budgets"): one counter per scope and minute, raised
-- atomically only while below the limit.
CREATE TABLE rate_counters (
    scope TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (scope, window_start)
);
