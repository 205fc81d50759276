-- The latest report each agent's SDK sent about its own side (outbox and consumer):
-- counts, modes and poison reasons, never payloads. One row per agent, replaced on
-- every report.
CREATE TABLE client_reports (
    agent_id    TEXT PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    report      TEXT    NOT NULL,
    received_at INTEGER NOT NULL
);
