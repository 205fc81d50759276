-- Which server instance holds an in-flight idempotency key. A retry that reaches the
-- same instance after the first attempt failed (and could not release the key
-- because the database was unreachable) takes the key over at once; a retry on
-- another instance waits for `locked_until`, as before.
ALTER TABLE idempotency_keys ADD COLUMN owner BYTEA;
