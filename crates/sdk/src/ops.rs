//! The operator API (`/api/v1/ops/…`): agents, overview, events, bulk actions, audit,
//! and the console's change stream. Needs a token with `ops:read` (reads) or
//! `ops:write` (creating agents, bulk actions); otherwise `forbidden`.

use reqwest::Method;
use serde_json::Value;
use switchboard_proto::{
    AgentClientSettings, AgentCreated, AgentDeleted, AgentSummary, AuditPage, BulkAction,
    BulkRequest, BulkResult, ClientSettings, ClientSettingsList, CreateAgent, EventDetail, EventId,
    EventListQuery, Job, JobPage, OpsEventPage, OpsHistory, Overview, ReceivedReport, StartJob,
    StoredClientSettings,
};
use switchboard_proto::{
    CreateLoginLink, CreateTenant, Credential, LoginLink, Revoked, TenantCreated, TenantSummary,
};

use crate::call::Call;
use crate::{Client, Error, SseStream};

impl Client {
    /// `POST /admin/tenants` (the deployment admin's token, scope `admin`): creates
    /// a tenant and the token of its first operator. The token is in the answer
    /// only; store it now.
    ///
    /// Errors: `name_invalid`, `conflict` (the name is taken), `forbidden` (not the
    /// admin's token).
    pub async fn create_tenant(&self, name: &str) -> Result<TenantCreated, Error> {
        let body = CreateTenant {
            name: name.to_owned(),
        };
        let call = Call::new(Method::POST, self.api_url(&["admin", "tenants"])?).json(&body)?;
        self.fetch(call).await
    }

    /// `GET /admin/tenants` (scope `admin`): every tenant with its number of agents.
    pub async fn tenants(&self) -> Result<Vec<TenantSummary>, Error> {
        self.fetch(Call::get(self.api_url(&["admin", "tenants"])?))
            .await
    }

    /// `POST /ops/login-links`: a one-time console login link (two minutes, single
    /// use) for this operator; `path` is relative to the server's URL. Opening it
    /// in a browser sets the console's session cookie. A read-only link opens a
    /// session without `ops:write`.
    pub async fn login_link(&self, read_only: bool) -> Result<LoginLink, Error> {
        let body = CreateLoginLink { read_only };
        let call = Call::new(Method::POST, self.api_url(&["ops", "login-links"])?).json(&body)?;
        self.fetch(call).await
    }

    /// `GET /ops/tokens`: the tenant's tokens (static credentials), live and revoked,
    /// never the token itself.
    pub async fn tokens(&self) -> Result<Vec<Credential>, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "tokens"])?))
            .await
    }

    /// `POST /ops/tokens/{token_id}/revoke`: revokes one token by its id (from
    /// [`Client::tokens`]); `revoked` is 0 when it already was.
    pub async fn revoke_token(&self, token_id: &str) -> Result<Revoked, Error> {
        let url = self.api_url(&["ops", "tokens", token_id, "revoke"])?;
        self.fetch(Call::new(Method::POST, url)).await
    }

    /// `POST /ops/agents/{agent}/revoke`: revokes every live token of an agent.
    pub async fn revoke_agent(&self, agent: &str) -> Result<Revoked, Error> {
        let url = self.api_url(&["ops", "agents", agent, "revoke"])?;
        self.fetch(Call::new(Method::POST, url)).await
    }

    /// `DELETE /ops/agents/{agent}`: deletes an agent: its credentials are revoked,
    /// its open events purged, it leaves its rooms and subscriptions, and its name
    /// is free again. Errors: `not_found`.
    pub async fn delete_agent(&self, agent: &str) -> Result<AgentDeleted, Error> {
        let url = self.api_url(&["ops", "agents", agent])?;
        self.fetch(Call::new(Method::DELETE, url)).await
    }

    /// `POST /ops/agents`: creates an agent and its token. The token is in the
    /// answer only; store it now.
    ///
    /// Errors: `name_invalid`, `name_confusable`, `conflict` (the name is taken).
    pub async fn create_agent(&self, agent: &CreateAgent) -> Result<AgentCreated, Error> {
        let call = Call::new(Method::POST, self.api_url(&["ops", "agents"])?).json(agent)?;
        self.fetch(call).await
    }

    /// `GET /ops/agents`: every agent of the tenant with its inbox counts.
    pub async fn agents(&self) -> Result<Vec<AgentSummary>, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "agents"])?))
            .await
    }

    /// `GET /ops/client-reports`: every agent's latest client report (its outbox
    /// counts and poison, its consumer's mode and local quarantine).
    pub async fn client_reports(&self) -> Result<Vec<ReceivedReport>, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "client-reports"])?))
            .await
    }

    /// `GET /ops/client-settings`: the tenant's remote client settings and every
    /// agent's own.
    pub async fn client_settings_list(&self) -> Result<ClientSettingsList, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "client-settings"])?))
            .await
    }

    /// `GET /ops/agents/{agent}/client-settings`: one agent's own settings and what
    /// its SDK obeys.
    ///
    /// Errors: `not_found`.
    pub async fn agent_client_settings(&self, agent: &str) -> Result<AgentClientSettings, Error> {
        self.fetch(Call::get(self.api_url(&[
            "ops",
            "agents",
            agent,
            "client-settings",
        ])?))
        .await
    }

    /// `PUT /ops/client-settings` (`agent` `None`) or
    /// `PUT /ops/agents/{agent}/client-settings`: replaces the settings the SDKs
    /// pick up from their next response. Repeating it is harmless.
    ///
    /// Errors: `validation_failed` (a ceiling out of bounds), `not_found`,
    /// `forbidden` (no `ops:write`).
    pub async fn put_client_settings(
        &self,
        agent: Option<&str>,
        settings: &ClientSettings,
    ) -> Result<StoredClientSettings, Error> {
        let call = Call::new(Method::PUT, self.client_settings_url(agent)?).json(settings)?;
        self.fetch(call).await
    }

    /// `DELETE` of the same: the agent inherits the tenant's settings again (the
    /// tenant the SDKs' own).
    pub async fn delete_client_settings(&self, agent: Option<&str>) -> Result<(), Error> {
        self.send(Call::new(Method::DELETE, self.client_settings_url(agent)?))
            .await
            .map(drop)
    }

    fn client_settings_url(&self, agent: Option<&str>) -> Result<reqwest::Url, Error> {
        match agent {
            None => self.api_url(&["ops", "client-settings"]),
            Some(agent) => self.api_url(&["ops", "agents", agent, "client-settings"]),
        }
    }

    /// `GET /ops/overview`: totals by status, subscribers, oldest pending age.
    pub async fn overview(&self) -> Result<Overview, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "overview"])?))
            .await
    }

    /// `GET /ops/events`: one page of events matching the query (unset fields do
    /// not narrow). Pass the page's `next_cursor` as `after` for the next page.
    ///
    /// Errors: `validation_failed` (limit out of range, unknown status).
    pub async fn events(&self, query: &EventListQuery) -> Result<OpsEventPage, Error> {
        let mut call = Call::get(self.api_url(&["ops", "events"])?);
        for (name, value) in query_pairs(query)? {
            call = call.query(&name, &value);
        }
        self.fetch(call).await
    }

    /// `GET /ops/events/{event_id}`: one event with its history.
    ///
    /// Errors: `not_found`.
    pub async fn event(&self, event_id: EventId) -> Result<EventDetail, Error> {
        let event_id = event_id.to_string();
        self.fetch(Call::get(self.api_url(&["ops", "events", &event_id])?))
            .await
    }

    /// `POST /ops/bulk/{replay|release|purge}`: applies `action` to the events
    /// named by `ids` or matched by `filter`; recorded in the audit log.
    ///
    /// Errors: `validation_failed` (neither or both of `ids` and `filter`).
    pub async fn bulk(
        &self,
        action: BulkAction,
        request: &BulkRequest,
    ) -> Result<BulkResult, Error> {
        let url = self.api_url(&["ops", "bulk", action.as_str()])?;
        self.fetch(Call::new(Method::POST, url).json(request)?)
            .await
    }

    /// `POST /ops/jobs`: starts a bulk job over every event `job.filter` (or
    /// `job.ids`) covers now; it runs on the server in batches. Follow it with
    /// [`Client::job`] or the `job` events of [`Client::ops_stream`].
    ///
    /// Errors: `validation_failed` (no ids or filter, rate out of 1..=10,000).
    pub async fn start_job(&self, job: &StartJob) -> Result<Job, Error> {
        let url = self.api_url(&["ops", "jobs"])?;
        self.fetch(Call::new(Method::POST, url).json(job)?).await
    }

    /// `GET /ops/jobs/{job_id}`: how far a job got.
    ///
    /// Errors: `not_found`.
    pub async fn job(&self, job_id: i64) -> Result<Job, Error> {
        let id = job_id.to_string();
        self.fetch(Call::get(self.api_url(&["ops", "jobs", &id])?))
            .await
    }

    /// `GET /ops/jobs`: the newest jobs first.
    pub async fn jobs(&self) -> Result<JobPage, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "jobs"])?)).await
    }

    /// `POST /ops/jobs/{job_id}/cancel`: stops a running job before its next batch.
    ///
    /// Errors: `not_found`.
    pub async fn cancel_job(&self, job_id: i64) -> Result<Job, Error> {
        let id = job_id.to_string();
        let url = self.api_url(&["ops", "jobs", &id, "cancel"])?;
        self.fetch(Call::new(Method::POST, url)).await
    }

    /// `GET /ops/history`: the overview's samples (depth and counters) and the
    /// delivery latency distribution over their window.
    pub async fn history(&self) -> Result<OpsHistory, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "history"])?))
            .await
    }

    /// `GET /ops/audit`: the newest audit entries, newest first.
    pub async fn audit(&self, limit: Option<u32>) -> Result<AuditPage, Error> {
        let mut call = Call::get(self.api_url(&["ops", "audit"])?);
        if let Some(limit) = limit {
            call = call.query("limit", &limit.to_string());
        }
        self.fetch(call).await
    }

    /// `GET /ops/stream`: the console's change stream. Events are `changed` (see
    /// [`crate::SseEvent::ops_change`]), `job` (a [`Job`] as JSON) and `heartbeat`. Reconnecting is the
    /// caller's job, as for [`Client::subscribe`].
    pub async fn ops_stream(&self) -> Result<SseStream, Error> {
        self.open_stream(self.api_url(&["ops", "stream"])?).await
    }
}

/// The query string of a serializable struct: one pair per set field. Fields added
/// to the struct later are picked up without a change here.
fn query_pairs(query: &impl serde::Serialize) -> Result<Vec<(String, String)>, Error> {
    let value = serde_json::to_value(query)
        .map_err(|e| Error::InvalidInput(format!("query cannot be serialized: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Error::InvalidInput(
            "a query must serialize to an object".into(),
        ));
    };
    Ok(fields
        .into_iter()
        .filter_map(|(name, value)| match value {
            Value::Null => None,
            Value::String(s) => Some((name, s)),
            other => Some((name, other.to_string())),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_proto::EventStatus;

    #[test]
    fn query_pairs_skip_unset_fields() {
        let query = EventListQuery {
            agent: Some("alice".into()),
            status: Some(EventStatus::Quarantined),
            q: Some("a b&c".into()),
            limit: Some(50),
            ..Default::default()
        };
        let mut pairs = query_pairs(&query).unwrap();
        pairs.sort();
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("agent", "alice"),
                ("limit", "50"),
                ("q", "a b&c"),
                ("status", "quarantined")
            ]
        );
        assert!(query_pairs(&EventListQuery::default()).unwrap().is_empty());
    }
}
