-- Which server process holds an in-flight idempotency key. A retry that reaches the
-- same process after the first attempt failed (and could not release the key, e.g.
-- the database was briefly unreachable) takes the key over at once instead of
-- answering 409 `request_in_progress` until `locked_until`.
ALTER TABLE idempotency_keys ADD COLUMN owner BLOB;
