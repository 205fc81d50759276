-- Webhook callbacks (issue 14). At most one per agent: a new registration that
-- passes its challenge replaces the agent's old one.
CREATE TABLE callbacks (
    id               VARCHAR(64) NOT NULL PRIMARY KEY,
    tenant_id        VARCHAR(64) NOT NULL,
    agent_id         VARCHAR(64) NOT NULL,
    url              TEXT NOT NULL,
    -- The secret sealed with the server's webhook key (XChaCha20-Poly1305, the
    -- callback id as associated data), and which key sealed it (its fingerprint).
    secret_sealed    VARBINARY(255) NOT NULL,
    key_id           VARCHAR(64) NOT NULL,
    state            VARCHAR(16) NOT NULL,
    disabled_reason  TEXT,
    created_at       BIGINT NOT NULL,
    last_delivery_at BIGINT,
    last_status      BIGINT,
    last_error       TEXT,
    failure_streak   BIGINT NOT NULL DEFAULT 0,
    failing_since    BIGINT,
    -- No delivery before this (the retry schedule, or a Retry-After).
    next_attempt_at  BIGINT NOT NULL DEFAULT 0,
    -- One delivery at a time per callback, across instances (per-agent order): the
    -- instance delivering holds the row until `leased_until`.
    lease_token      VARCHAR(64),
    leased_until     BIGINT,
    UNIQUE (agent_id),
    KEY callbacks_tenant (tenant_id, created_at),
    KEY callbacks_due (state, next_attempt_at),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    FOREIGN KEY (agent_id) REFERENCES agents (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Each delivery attempt, for the console (the event's timeline has them too).
CREATE TABLE callback_attempts (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    callback_id VARCHAR(64) NOT NULL,
    event_id    VARCHAR(64),
    kind        VARCHAR(16) NOT NULL,
    at          BIGINT NOT NULL,
    status      BIGINT,
    error       TEXT,
    latency_ms  BIGINT NOT NULL,
    KEY callback_attempts_callback (callback_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
