-- A job's owner and heartbeat, as on PostgreSQL, so that one text of the job
-- statements serves every backend. One process owns a SQLite file: its jobs have no
-- owner (NULL), and at start every live job is one whose process stopped.
ALTER TABLE audit_log ADD COLUMN job_owner TEXT;
ALTER TABLE audit_log ADD COLUMN job_heartbeat_at INTEGER;
