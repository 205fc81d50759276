-- The happy path's timeline as columns of the event row: see the SQLite migration 0017.
ALTER TABLE events ADD COLUMN claimed_at BIGINT, ADD COLUMN claimed_by TEXT,
    ADD COLUMN completed_at BIGINT;
UPDATE events e SET claimed_by = 'agent:' || a.name FROM agents a
    WHERE a.id = e.agent_id AND e.status = 'claimed';
DELETE FROM event_history WHERE action = 'created';
