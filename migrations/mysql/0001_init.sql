-- The MariaDB / MySQL schema: the same tables and columns as the PostgreSQL
-- migrations 0001..0002 (and so SQLite's 0001..0009), so one row mapping serves every
-- backend, plus `wakes`, the table other instances watch for wake-ups (MySQL has no
-- LISTEN/NOTIFY). MariaDB 10.11 (tested) and MySQL 8.0 (by their manuals).
--
-- - InnoDB, utf8mb4 with a binary collation (`utf8mb4_bin`): ids, names and keys are
--   compared exactly, as PostgreSQL and SQLite compare them.
-- - Ids are UUID text in VARCHAR(64); hashes and salts VARBINARY; times are
--   milliseconds since the epoch (BIGINT) from the server's clock.
-- - An indexed text column is a VARCHAR no longer than what the server accepts
--   (names: 64 characters, record keys: 200 bytes, skeletons of names: a few times
--   the name; an InnoDB key holds at most 3072 bytes, 768 utf8mb4 characters).
--   JSON bodies are MEDIUMTEXT (the request limit is 5 MiB, TEXT holds 64 KiB).
-- - MySQL has no partial indexes: where PostgreSQL indexes the rows of one status,
--   this index leads with the status.
-- - The server sets ANSI_QUOTES: "key" below is the column (a reserved word).

CREATE TABLE tenants (
    id          VARCHAR(64) NOT NULL PRIMARY KEY,
    name        VARCHAR(255) NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    audit_salt  VARBINARY(64)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE agents (
    id           VARCHAR(64) NOT NULL PRIMARY KEY,
    tenant_id    VARCHAR(64) NOT NULL,
    name         VARCHAR(255) NOT NULL,
    -- The per-agent sequence (I2): a send takes this row's lock with
    -- `UPDATE … SET head_seq = head_seq + 1`, so a second sender to the same agent
    -- waits for the first one's commit and gets the next number after it.
    head_seq     BIGINT NOT NULL DEFAULT 0,
    low_water    BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT,
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE tokens (
    hash        VARBINARY(64) NOT NULL PRIMARY KEY,
    tenant_id   VARCHAR(64) NOT NULL,
    agent_id    VARCHAR(64),
    scopes      TEXT NOT NULL,
    label       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT,
    FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    FOREIGN KEY (agent_id) REFERENCES agents (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE events (
    id               VARCHAR(64) NOT NULL PRIMARY KEY,
    tenant_id        VARCHAR(64) NOT NULL,
    agent_id         VARCHAR(64) NOT NULL,
    seq              BIGINT NOT NULL,
    sender_agent_id  VARCHAR(64),
    sender_name      TEXT,
    room_id          VARCHAR(64),
    room_seq         BIGINT,
    correlation_id   TEXT,
    priority         BIGINT NOT NULL DEFAULT 0,
    status           VARCHAR(16) NOT NULL,
    payload          MEDIUMTEXT,
    attempts         BIGINT NOT NULL DEFAULT 0,
    max_attempts     BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    available_at     BIGINT NOT NULL,
    expires_at       BIGINT,
    claim_token      VARCHAR(64),
    lease_expires_at BIGINT,
    last_error       TEXT,
    updated_at       BIGINT NOT NULL,
    UNIQUE (agent_id, seq),
    FOREIGN KEY (agent_id) REFERENCES agents (id),
    -- The claim: `WHERE agent_id = ? AND status = 'pending' ORDER BY priority DESC,
    -- seq LIMIT n FOR UPDATE SKIP LOCKED` reads this index in order and stops after
    -- n rows; it leads with the recipient, so claimers of different agents never
    -- touch each other's index range.
    INDEX events_claim (agent_id, status, priority DESC, seq),
    INDEX events_lease (status, lease_expires_at),
    INDEX events_expiry (status, expires_at),
    INDEX events_tenant (tenant_id, id),
    INDEX events_retention (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE event_history (
    id        BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id  VARCHAR(64) NOT NULL,
    at        BIGINT NOT NULL,
    action    VARCHAR(64) NOT NULL,
    actor     TEXT NOT NULL,
    detail    TEXT,
    INDEX event_history_event (event_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE rooms (
    id          VARCHAR(64) NOT NULL PRIMARY KEY,
    tenant_id   VARCHAR(64) NOT NULL,
    name        VARCHAR(255) NOT NULL,
    head_seq    BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE room_members (
    room_id    VARCHAR(64) NOT NULL,
    agent_id   VARCHAR(64) NOT NULL,
    joined_at  BIGINT NOT NULL,
    PRIMARY KEY (room_id, agent_id),
    FOREIGN KEY (room_id) REFERENCES rooms (id),
    FOREIGN KEY (agent_id) REFERENCES agents (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE room_messages (
    room_id          VARCHAR(64) NOT NULL,
    seq              BIGINT NOT NULL,
    sender_agent_id  VARCHAR(64),
    payload          MEDIUMTEXT NOT NULL,
    correlation_id   TEXT,
    created_at       BIGINT NOT NULL,
    PRIMARY KEY (room_id, seq),
    FOREIGN KEY (room_id) REFERENCES rooms (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE idempotency_keys (
    tenant_id    VARCHAR(64) NOT NULL,
    principal    VARCHAR(128) NOT NULL,
    key_hash     VARBINARY(64) NOT NULL,
    fingerprint  VARBINARY(64) NOT NULL,
    state        VARCHAR(16) NOT NULL,
    status_code  BIGINT,
    response     MEDIUMTEXT,
    created_at   BIGINT NOT NULL,
    locked_until BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    -- Which server instance holds an in-flight key (PostgreSQL's 0002): a retry
    -- that reaches the same instance after the first attempt failed takes the key
    -- over at once; a retry on another instance waits for `locked_until`.
    owner        VARBINARY(64),
    PRIMARY KEY (tenant_id, principal, key_hash),
    INDEX idempotency_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE audit_log (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant_id    VARCHAR(64) NOT NULL,
    actor        TEXT NOT NULL,
    action       VARCHAR(64) NOT NULL,
    ids          MEDIUMTEXT,
    filter       MEDIUMTEXT,
    count        BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    job_state    VARCHAR(16),
    job_total    BIGINT,
    job_rate     BIGINT,
    job_error    TEXT,
    finished_at  BIGINT,
    -- Several instances: the instance running a job, and when it last said so. A
    -- job whose heartbeat is older than the takeover window was interrupted.
    job_owner    VARCHAR(64),
    job_heartbeat_at BIGINT,
    INDEX audit_log_tenant (tenant_id, id),
    INDEX audit_log_live_jobs (job_state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE client_reports (
    agent_id    VARCHAR(64) NOT NULL PRIMARY KEY,
    report      MEDIUMTEXT NOT NULL,
    received_at BIGINT NOT NULL,
    FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE console_grants (
    hash        VARBINARY(64) NOT NULL PRIMARY KEY,
    kind        VARCHAR(16) NOT NULL,
    tenant_id   VARCHAR(64) NOT NULL,
    token_hash  VARBINARY(64) NOT NULL,
    scopes      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    INDEX console_grants_expiry (expires_at),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    FOREIGN KEY (token_hash) REFERENCES tokens (hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE memories (
    id                VARCHAR(64) NOT NULL PRIMARY KEY,
    tenant_id         VARCHAR(64) NOT NULL,
    label             TEXT,
    parent_id         VARCHAR(64),
    branched_at_token BIGINT,
    fence             BIGINT NOT NULL DEFAULT 0,
    quiet_until       BIGINT NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL,
    fence_seen        BIGINT NOT NULL DEFAULT 0,
    INDEX memories_parent (parent_id),
    INDEX memories_tenant (tenant_id, id),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    FOREIGN KEY (parent_id) REFERENCES memories (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE name_fences (
    skeleton    VARCHAR(700) NOT NULL PRIMARY KEY,
    fence       BIGINT NOT NULL,
    quiet_until BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE leases (
    id            VARCHAR(64) NOT NULL PRIMARY KEY,
    tenant_id     VARCHAR(64) NOT NULL,
    name          VARCHAR(255) NOT NULL,
    skeleton      VARCHAR(700) NOT NULL UNIQUE,
    memory_id     VARCHAR(64) NOT NULL UNIQUE,
    fence         BIGINT NOT NULL,
    holder        TEXT NOT NULL,
    owner_client  TEXT,
    ttl_ms        BIGINT NOT NULL,
    lock_delay_ms BIGINT NOT NULL,
    acquired_at   BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    INDEX leases_tenant (tenant_id, expires_at),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    FOREIGN KEY (memory_id) REFERENCES memories (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE memory_records (
    memory_id     VARCHAR(64) NOT NULL,
    "key"         VARCHAR(200) NOT NULL,
    value         MEDIUMTEXT NOT NULL,
    version       BIGINT NOT NULL,
    fencing_token BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (memory_id, "key"),
    FOREIGN KEY (memory_id) REFERENCES memories (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE issued_tokens (
    memory_id    VARCHAR(64) NOT NULL,
    fence        BIGINT NOT NULL,
    lease_id     VARCHAR(64) NOT NULL,
    owner_client TEXT,
    holder       TEXT NOT NULL,
    issued_at    BIGINT NOT NULL,
    PRIMARY KEY (memory_id, fence)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE fencing_rejections (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant_id    VARCHAR(64) NOT NULL,
    memory_id    VARCHAR(64) NOT NULL,
    presented    BIGINT NOT NULL,
    current      BIGINT NOT NULL,
    owner_client TEXT,
    actor        TEXT NOT NULL,
    operation    TEXT NOT NULL,
    at           BIGINT NOT NULL,
    INDEX fencing_rejections_tenant (tenant_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE memory_subscribers (
    memory_id VARCHAR(64) NOT NULL,
    agent_id  VARCHAR(64) NOT NULL,
    PRIMARY KEY (memory_id, agent_id),
    FOREIGN KEY (memory_id) REFERENCES memories (id),
    FOREIGN KEY (agent_id) REFERENCES agents (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE lease_audit (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant_id     VARCHAR(64) NOT NULL,
    event         VARCHAR(32) NOT NULL,
    name_hash     VARCHAR(64),
    memory_hash   VARCHAR(64) NOT NULL,
    fencing_token BIGINT NOT NULL,
    actor         TEXT NOT NULL,
    at            BIGINT NOT NULL,
    INDEX lease_audit_tenant (tenant_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE registered_names (
    skeleton   VARCHAR(700) NOT NULL PRIMARY KEY,
    name       VARCHAR(255) NOT NULL UNIQUE,
    original   TEXT NOT NULL,
    tenant_id  VARCHAR(64) NOT NULL,
    created_at BIGINT NOT NULL,
    FOREIGN KEY (tenant_id) REFERENCES tenants (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Wake-ups for the other instances. A write transaction that wakes inboxes inserts
-- its rows here just before it commits, so they become visible to the other
-- instances with the commit and never before it (I1). Each instance polls the table
-- (`store/mysql/wakes.rs`) and skips its own rows; ids are assigned at insert, not
-- at commit, so a watcher keeps re-reading the ids it saw missing until they
-- commit or age out. Rows are pruned minutes later by id.
CREATE TABLE wakes (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    instance    VARCHAR(64) NOT NULL,
    tenant_id   VARCHAR(64) NOT NULL,
    agent_id    VARCHAR(64) NOT NULL,
    cursor_hint BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
