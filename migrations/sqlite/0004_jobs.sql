-- Bulk jobs: an operator action over "everything matching this filter" that runs in
-- batches. The job is its audit row; `count` is its progress, updated in the same
-- transaction as each batch, so the audit log never claims more than was changed.
ALTER TABLE audit_log ADD COLUMN job_state TEXT;     -- NULL: an immediate action
ALTER TABLE audit_log ADD COLUMN job_total INTEGER;  -- matching events at start
ALTER TABLE audit_log ADD COLUMN job_rate INTEGER;   -- events per second, NULL: unpaced
ALTER TABLE audit_log ADD COLUMN job_error TEXT;
ALTER TABLE audit_log ADD COLUMN finished_at INTEGER;
CREATE INDEX audit_log_live_jobs ON audit_log (job_state)
    WHERE job_state IN ('running', 'cancelling');
