-- Remote client settings (issue 18): what an operator tells the SDKs of a tenant's
-- agents. `agent_id` '' is the tenant's row, for every agent without its own; an
-- agent's row overrides it field by field. NULL leaves the value to the row below
-- (the tenant's, then the SDK's own). The token lookup joins both rows, so every
-- response to an agent carries them without another read.
CREATE TABLE client_settings (
    tenant_id       TEXT   NOT NULL,
    agent_id        TEXT   NOT NULL,
    poll_ceiling_ms BIGINT,
    reports_paused  BIGINT,
    updated_at      BIGINT NOT NULL,
    updated_by      TEXT   NOT NULL,
    PRIMARY KEY (tenant_id, agent_id)
);
