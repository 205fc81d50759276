-- The happy path's timeline as columns of the event row (issue 16): sending, a claim
-- and an ack write no `event_history` row. `created` is the row's `created_at` and
-- sender; the current claim is `claimed_at`, `claimed_by` (with `attempts` of
-- `max_attempts`); its ack is `completed_at` (by the claimer, the inbox's agent).
-- Everything else (releases, expired leases, quarantines, expiry, operator actions)
-- still writes rows, and first moves a claim and ack held in the columns into rows
-- of their own, so the columns only ever hold steps after the last row
-- (`store/engine/timeline.rs`).
ALTER TABLE events ADD COLUMN claimed_at INTEGER;
ALTER TABLE events ADD COLUMN claimed_by TEXT;
ALTER TABLE events ADD COLUMN completed_at INTEGER;
-- An event claimed before this migration has its claim as a row already; its ack
-- names the claimer from `claimed_by`.
UPDATE events SET claimed_by = 'agent:' || (SELECT name FROM agents WHERE agents.id = events.agent_id)
    WHERE status = 'claimed';
-- The row's own `created_at` and sender say the same.
DELETE FROM event_history WHERE action = 'created';
