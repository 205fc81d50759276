use super::StepStatements;
use std::time::{Duration, Instant};
use switchboard_proto::{AgentId, ClaimToken, EventId, TenantId};

/// Rows an earlier version wrote (a `created` history row per event): an event
/// done, one claimed.
pub(crate) struct OldRows {
    pub(crate) tenant: TenantId,
    agent: AgentId,
    pub(crate) done: EventId,
    held: EventId,
    token: ClaimToken,
}

impl OldRows {
    pub(crate) fn new() -> Self {
        Self {
            tenant: TenantId::new(),
            agent: AgentId::new(),
            done: EventId::new(),
            held: EventId::new(),
            token: ClaimToken::new(),
        }
    }

    /// The statements that write them, in every dialect.
    pub(crate) fn statements(&self) -> Vec<String> {
        let Self {
            tenant,
            agent,
            done,
            held,
            token,
        } = self;
        vec![
            format!("INSERT INTO tenants (id, name, created_at) VALUES ('{tenant}', 'old', 0)"),
            format!(
                "INSERT INTO agents (id, tenant_id, name, head_seq, created_at) \
                 VALUES ('{agent}', '{tenant}', 'old-bot', 2, 0)"
            ),
            format!(
                "INSERT INTO events (id, tenant_id, agent_id, seq, status, attempts, \
                 max_attempts, created_at, available_at, updated_at) \
                 VALUES ('{done}', '{tenant}', '{agent}', 1, 'completed', 1, 5, 10, 10, 30)"
            ),
            format!(
                "INSERT INTO events (id, tenant_id, agent_id, seq, status, payload, \
                 attempts, max_attempts, created_at, available_at, claim_token, \
                 lease_expires_at, updated_at) \
                 VALUES ('{held}', '{tenant}', '{agent}', 2, 'claimed', '{{}}', 1, 5, 40, \
                 40, '{token}', 100000, 50)"
            ),
            format!(
                "INSERT INTO event_history (event_id, at, action, actor, detail) VALUES \
                 ('{done}', 10, 'created', 'operator', NULL), \
                 ('{done}', 20, 'claimed', 'agent:old-bot', 'attempt 1 of 5'), \
                 ('{done}', 30, 'acked', 'agent:old-bot', NULL), \
                 ('{held}', 40, 'created', 'operator', NULL), \
                 ('{held}', 50, 'claimed', 'agent:old-bot', 'attempt 1 of 5')"
            ),
        ]
    }

    /// Checks the timeline a reader gives of the finished event: one `created`
    /// (from the row; its `created` row may still be there), then its rows.
    pub(crate) async fn check_timeline<D: crate::Store>(&self, d: &D) {
        let detail = d
            .event_detail(self.tenant, self.done)
            .await
            .expect("detail");
        let steps: Vec<(&str, &str)> = detail
            .history
            .iter()
            .map(|h| (h.action.as_str(), h.actor.as_str()))
            .collect();
        assert_eq!(
            steps,
            [
                ("created", "operator"),
                ("claimed", "agent:old-bot"),
                ("acked", "agent:old-bot")
            ],
            "the timeline of an event sent before the upgrade"
        );
    }
}

/// Waits until every step is finished (in the background), at most 60 s.
pub(crate) async fn until_finished<D: StepStatements>(d: &D) {
    let start = Instant::now();
    while !d.unfinished_steps().await.expect("steps").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the batched steps finish"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
