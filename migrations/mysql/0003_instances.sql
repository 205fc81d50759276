-- The server instances sharing this database, each with the time of its last
-- heartbeat (every second). An instance that has not beaten for 10 s is dead: the
-- idempotency keys it left in flight and the bulk jobs it ran are taken over within
-- seconds instead of after their 60 s / 30 s locks. A live but stalled instance taken
-- for dead commits nothing: its attempt no longer owns the key (I8) or the job.
CREATE TABLE instances (
    instance VARCHAR(64) PRIMARY KEY,
    beat_at  BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
