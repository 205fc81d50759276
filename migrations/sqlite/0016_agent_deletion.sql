-- Deleting an agent (issue 15): the row stays (its events, history and audit refer
-- to it) with `deleted_at` set and its name replaced by `deleted:<id>`, a name no
-- agent can have (`:` is refused in names), so the name is free for a new agent.
-- Every lookup of agents skips deleted ones, and a deleted agent's sequence cannot
-- be advanced: nothing is delivered to it after its deletion commits.
ALTER TABLE agents ADD COLUMN deleted_at INTEGER;
