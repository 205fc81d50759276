-- The agent's local state: the durable outbox and the inbox consumer's bookkeeping.
-- One file per profile (see switchboard_sdk::local). Times are Unix milliseconds.

-- Messages waiting to leave the machine (invariant I10: written before any network
-- I/O). `lane` orders delivery: entries of one lane go strictly one after another, in
-- id order; lanes are independent.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    lane            TEXT    NOT NULL,
    target_kind     TEXT    NOT NULL CHECK (target_kind IN ('agent', 'room')),
    target          TEXT    NOT NULL,
    message_type    TEXT    NOT NULL,
    -- The SendMessage JSON as the privacy gate cleared it.
    body            BLOB    NOT NULL,
    -- Reused on every retry, so the server stores the message once.
    idempotency_key TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('queued', 'sending', 'retryable', 'sent', 'poison')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    -- The last backoff delay: the state of the decorrelated jitter.
    last_delay_ms   INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    -- The server's receipt once sent.
    receipt         TEXT
);
CREATE INDEX outbox_open_by_lane ON outbox (lane, id)
    WHERE state IN ('queued', 'sending', 'retryable');
CREATE INDEX outbox_by_state ON outbox (state, updated_at);

-- Counters that outlive the rows they count (entries removed on expiry).
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);

-- Read positions: the consumer's and `tail`'s cursor per agent, saved after each page.
CREATE TABLE cursors (
    name       TEXT PRIMARY KEY,
    cursor     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Dedup and local states of claimed events, bounded by age and count.
CREATE TABLE inbox_seen (
    event_id   TEXT PRIMARY KEY,
    agent      TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    state      TEXT    NOT NULL
        CHECK (state IN ('delivered', 'read', 'handled', 'acked', 'poisoned')),
    failures   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    seen_at    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX inbox_seen_by_age ON inbox_seen (updated_at);

-- What a running consumer last said about itself, for `switchboard agent status`
-- in another process.
CREATE TABLE agent_state (
    name       TEXT PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
