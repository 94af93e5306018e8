-- 0013: the operator keeps each job's count of its settled history (occurrences older than a
-- day and than its catch-up window) between status refreshes and reads only what is newer.
-- What can still change settled history moves this epoch in its own transaction: a backfill
-- (cs_request_runs) and retention (maintain). A refresh that sees another epoch counts afresh.

CREATE TABLE history_epoch (
    single boolean PRIMARY KEY DEFAULT true CHECK (single),  -- one row
    epoch bigint NOT NULL DEFAULT 0                          -- +1 when settled history changes
);
INSERT INTO history_epoch DEFAULT VALUES;
