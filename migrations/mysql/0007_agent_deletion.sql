-- Deleting an agent: see the SQLite migration 0016.
ALTER TABLE agents ADD COLUMN deleted_at BIGINT;
