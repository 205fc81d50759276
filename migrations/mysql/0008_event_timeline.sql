-- The happy path's timeline as columns of the event row: see the SQLite migration 0017.
ALTER TABLE events ADD COLUMN claimed_at BIGINT, ADD COLUMN claimed_by TEXT,
    ADD COLUMN completed_at BIGINT;
UPDATE events e JOIN agents a ON a.id = e.agent_id SET e.claimed_by = CONCAT('agent:', a.name)
    WHERE e.status = 'claimed';
DELETE FROM event_history WHERE action = 'created';
