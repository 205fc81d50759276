-- The outbox's horizon (invariants I8 and I10 together): an entry is resent only
-- while the server still remembers its idempotency key. The server records the key
-- when an attempt reaches it, so the clock that matters is the first attempt that
-- may have reached the server: `first_attempt_at`. An entry past that window is not
-- resent and not deleted either: it becomes `expired`, a terminal state with its
-- reason in `last_error`, kept for the operator like `poison`.
--
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt.

CREATE TABLE outbox_next (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    lane             TEXT    NOT NULL,
    target_kind      TEXT    NOT NULL CHECK (target_kind IN ('agent', 'room')),
    target           TEXT    NOT NULL,
    message_type     TEXT    NOT NULL,
    body             BLOB    NOT NULL,
    idempotency_key  TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state IN ('queued', 'sending', 'retryable', 'sent', 'poison', 'expired')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    last_delay_ms    INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    receipt          TEXT,
    -- When the first attempt that may have reached the server started (the
    -- earliest the server can have recorded the key). NULL while no attempt has
    -- left the machine: an attempt that failed to connect sent nothing.
    first_attempt_at INTEGER
);

-- Entries written before this migration do not say when they were first tried.
-- Their creation is the earliest it can have been, so it is the safe guess.
INSERT INTO outbox_next (id, lane, target_kind, target, message_type, body,
    idempotency_key, state, attempts, next_attempt_at, last_delay_ms, last_error,
    created_at, updated_at, receipt, first_attempt_at)
SELECT id, lane, target_kind, target, message_type, body, idempotency_key, state,
    attempts, next_attempt_at, last_delay_ms, last_error, created_at, updated_at,
    receipt, CASE WHEN attempts > 0 THEN created_at END
FROM outbox;

-- Keep the id sequence: ids of removed entries are not handed out again.
DELETE FROM sqlite_sequence WHERE name = 'outbox_next';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'outbox_next', seq FROM sqlite_sequence WHERE name = 'outbox';

DROP TABLE outbox;
ALTER TABLE outbox_next RENAME TO outbox;
CREATE INDEX outbox_open_by_lane ON outbox (lane, id)
    WHERE state IN ('queued', 'sending', 'retryable');
CREATE INDEX outbox_by_state ON outbox (state, updated_at);
