//! What an application that embeds the server may use (the desktop shell): the few
//! things its tray and window need, on a cheap handle ([`Console`]) that
//! [`Server::console`](crate::Server::console) returns.
//!
//! An embedding app does everything else through the server's HTTP API, like any
//! other client: its smoke test, for one, creates an agent, sends, claims and
//! releases over HTTP with [`Console::operator_token`]. What it reads here comes from
//! the application's use cases (`app/`), never from the store. The store, the HTTP
//! layer's state and the workers are the server's own; they are public only for this
//! workspace's integration tests and benchmarks, not as an interface.

use crate::app::AppState;
use crate::error::ApiError;
use std::collections::BTreeMap;
use std::sync::Arc;
use switchboard_proto::{EventListQuery, EventStatus};

/// A handle on a running server for the app that embeds it.
#[derive(Clone)]
pub struct Console {
    state: AppState,
    /// The default tenant's operator token; in memory only, never logged.
    operator_token: Arc<str>,
}

impl Console {
    pub(crate) fn new(state: AppState, operator_token: &str) -> Self {
        Self {
            state,
            operator_token: operator_token.into(),
        }
    }

    /// Quarantined events per agent name of the operator's tenant (what the tray
    /// badge and its notifications count); agents with none are included with 0.
    pub async fn quarantined(&self) -> Result<BTreeMap<String, u64>, ApiError> {
        crate::app::ops::quarantined(&self.state, self.state.tenant).await
    }

    /// The operator's tenant's disabled webhook callbacks: id → (agent, reason).
    pub async fn disabled_callbacks(
        &self,
    ) -> Result<BTreeMap<switchboard_proto::CallbackId, (String, String)>, ApiError> {
        let callbacks = crate::app::callbacks::list(&self.state, self.state.tenant, None).await?;
        Ok(callbacks
            .into_iter()
            .filter(|c| c.state == switchboard_proto::CallbackState::Disabled)
            .map(|c| {
                let reason = c.disabled_reason.unwrap_or_default();
                (c.callback_id, (c.agent, reason))
            })
            .collect())
    }

    /// The last error of `agent`'s newest quarantined event, if it has one.
    pub async fn last_quarantine_error(&self, agent: &str) -> Option<String> {
        let query = EventListQuery {
            agent: Some(agent.to_owned()),
            status: Some(EventStatus::Quarantined),
            ..EventListQuery::default()
        };
        let page = crate::app::ops::events(&self.state, self.state.tenant, &query, 1000)
            .await
            .ok()?;
        page.events.last().and_then(|e| e.event.last_error.clone())
    }

    /// A one-time login link's path (`/login?ticket=…`, single use, two minutes) for
    /// the operator: the app's window opens it and gets the session cookie.
    pub async fn login_path(&self) -> Result<String, ApiError> {
        self.state
            .sessions()
            .login_link(&self.operator_token, false)
            .await
            .map(|link| link.path)
    }

    /// The default tenant's operator token (`ops:read ops:write`), for the app's own
    /// calls to the HTTP API. Keep it in memory; never log or show it.
    pub fn operator_token(&self) -> &str {
        &self.operator_token
    }

    /// Whether the server is shutting down (background loops should end).
    pub fn is_stopping(&self) -> bool {
        self.state.shutdown.is_cancelled()
    }
}
