//! Remote client settings: what an operator tells the SDKs of a tenant's agents,
//! for the whole tenant or for one agent (`/ops/client-settings`,
//! `/ops/agents/{agent}/client-settings`).
//!
//! - `poll_ceiling_ms`: the longest a consumer waits between two looks at its inbox
//!   (the SDK's `max_poll`, 5 min by default). Lower it when wake-ups are lost (a
//!   proxy that cuts SSE streams), raise it to shed the load of a polling fleet.
//! - `reports_paused`: the SDK sends no client report (`PUT
//!   /agents/{agent}/client-report`) while set, for an incident.
//!
//! Each field of a stored row is optional: an agent's row overrides the tenant's
//! field by field, and an unset field leaves the SDK's own value. Every response to
//! an agent's request carries the settings in effect for it in the
//! [`CLIENT_SETTINGS_HEADER`], so the SDK picks up a change from its next response;
//! a response without the header (an older server, a request refused before its
//! token was read) changes nothing.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::AgentId;

/// The response header with the settings in effect for the calling agent: an
/// RFC 8941 Dictionary such as `poll-ceiling=30000, reports-paused` (or
/// `reports-paused=?0`). Unknown members are ignored.
pub const CLIENT_SETTINGS_HEADER: &str = "switchboard-client-settings";
/// Shortest polling ceiling an operator may set, in milliseconds (1 s).
pub const MIN_POLL_CEILING_MS: u64 = 1_000;
/// Longest polling ceiling an operator may set, in milliseconds (1 h).
pub const MAX_POLL_CEILING_MS: u64 = 3_600_000;

/// What an operator sets, for a tenant or one agent; `None` inherits (the agent
/// from the tenant, the tenant from the SDK's own configuration).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    /// The longest wait between two looks at the inbox, in milliseconds
    /// (1,000 to 3,600,000).
    #[serde(default)]
    pub poll_ceiling_ms: Option<u64>,
    /// Whether the SDK holds back its client reports.
    #[serde(default)]
    pub reports_paused: Option<bool>,
}

impl ClientSettings {
    /// Checks the bounds; the message says how to fix it.
    pub fn check(&self) -> Result<(), String> {
        match self.poll_ceiling_ms {
            Some(ms) if !(MIN_POLL_CEILING_MS..=MAX_POLL_CEILING_MS).contains(&ms) => Err(format!(
                "poll_ceiling_ms is {ms}; set it between {MIN_POLL_CEILING_MS} (1 s) and \
                 {MAX_POLL_CEILING_MS} (1 h), or null to leave the SDK's own"
            )),
            _ => Ok(()),
        }
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// These settings, each unset field taken from `base`.
    pub fn over(self, base: Self) -> Self {
        Self {
            poll_ceiling_ms: self.poll_ceiling_ms.or(base.poll_ceiling_ms),
            reports_paused: self.reports_paused.or(base.reports_paused),
        }
    }

    /// What an SDK obeys under these settings.
    pub fn effective(self) -> EffectiveClientSettings {
        EffectiveClientSettings {
            poll_ceiling_ms: self.poll_ceiling_ms,
            reports_paused: self.reports_paused.unwrap_or(false),
        }
    }
}

/// The settings in effect for one agent: its own over its tenant's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EffectiveClientSettings {
    /// `None`: the SDK's own `max_poll`.
    pub poll_ceiling_ms: Option<u64>,
    pub reports_paused: bool,
}

/// A stored row: the tenant's (no agent) or one agent's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredClientSettings {
    /// `None`: the tenant's settings, for every agent without its own.
    pub agent_id: Option<AgentId>,
    pub name: Option<String>,
    pub settings: ClientSettings,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// Who set them: `operator`, or the agent that did.
    pub updated_by: String,
}

/// `GET /ops/client-settings`: the tenant's settings and every agent's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClientSettingsList {
    /// `None`: nothing set for the tenant.
    pub tenant: Option<StoredClientSettings>,
    /// The agents with settings of their own, by name.
    pub agents: Vec<StoredClientSettings>,
}

impl ClientSettingsList {
    /// What an agent obeys: its own row over the tenant's.
    pub fn effective_for(&self, agent: AgentId) -> EffectiveClientSettings {
        let own = self
            .agents
            .iter()
            .find(|s| s.agent_id == Some(agent))
            .map(|s| s.settings)
            .unwrap_or_default();
        let tenant = self.tenant.as_ref().map(|s| s.settings).unwrap_or_default();
        own.over(tenant).effective()
    }
}

/// `GET /ops/agents/{agent}/client-settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentClientSettings {
    pub agent_id: AgentId,
    pub name: String,
    /// The agent's own row, if it has one.
    pub own: Option<StoredClientSettings>,
    /// What its SDK obeys now (own over the tenant's).
    pub effective: EffectiveClientSettings,
}

#[cfg(feature = "header")]
mod header {
    use super::*;
    use sfv::{BareItem, DictSerializer, Dictionary, KeyRef, ListEntry, Parser};

    const POLL_CEILING: &KeyRef = KeyRef::constant("poll-ceiling");
    const REPORTS_PAUSED: &KeyRef = KeyRef::constant("reports-paused");

    impl EffectiveClientSettings {
        /// The [`CLIENT_SETTINGS_HEADER`] value; never empty.
        pub fn header_value(&self) -> String {
            let mut dict = DictSerializer::new();
            if let Some(ms) = self.poll_ceiling_ms {
                // Stored values are checked (≤ 1 h), far below an sfv Integer's bound.
                let ms = sfv::Integer::constant(ms.min(MAX_POLL_CEILING_MS) as i64);
                let _ = dict.bare_item(POLL_CEILING, ms);
            }
            let _ = dict.bare_item(REPORTS_PAUSED, self.reports_paused);
            dict.finish().unwrap_or_default()
        }

        /// Parses a [`CLIENT_SETTINGS_HEADER`] value. Unknown members are ignored; a
        /// known member of the wrong type, a ceiling out of bounds, or a value that is
        /// no Dictionary is an error (the caller keeps what it had).
        pub fn parse_header(value: &str) -> Result<Self, String> {
            let dict: Dictionary = Parser::new(value)
                .parse()
                .map_err(|e| format!("not a structured-field dictionary ({e})"))?;
            let item = |key: &KeyRef| match dict.get(key) {
                None => Ok(None),
                Some(ListEntry::Item(item)) => Ok(Some(item.bare_item.clone())),
                Some(ListEntry::InnerList(_)) => Err(format!("{} is a list", key.as_str())),
            };
            let poll_ceiling_ms = match item(POLL_CEILING)? {
                None => None,
                Some(BareItem::Integer(ms)) => {
                    let ms = u64::try_from(i64::from(ms)).unwrap_or(0);
                    if !(MIN_POLL_CEILING_MS..=MAX_POLL_CEILING_MS).contains(&ms) {
                        return Err(format!("poll-ceiling {ms} is out of bounds"));
                    }
                    Some(ms)
                }
                Some(_) => return Err("poll-ceiling is not an integer".into()),
            };
            let reports_paused = match item(REPORTS_PAUSED)? {
                None => false,
                Some(BareItem::Boolean(paused)) => paused,
                Some(_) => return Err("reports-paused is not a boolean".into()),
            };
            Ok(Self {
                poll_ceiling_ms,
                reports_paused,
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_header_round_trips() {
            for settings in [
                EffectiveClientSettings::default(),
                EffectiveClientSettings {
                    poll_ceiling_ms: Some(30_000),
                    reports_paused: true,
                },
                EffectiveClientSettings {
                    poll_ceiling_ms: Some(MIN_POLL_CEILING_MS),
                    reports_paused: false,
                },
            ] {
                let value = settings.header_value();
                assert!(!value.is_empty());
                assert_eq!(
                    EffectiveClientSettings::parse_header(&value),
                    Ok(settings),
                    "{value}"
                );
            }
            assert_eq!(
                EffectiveClientSettings {
                    poll_ceiling_ms: Some(30_000),
                    reports_paused: true
                }
                .header_value(),
                "poll-ceiling=30000, reports-paused"
            );
            assert_eq!(
                EffectiveClientSettings::default().header_value(),
                "reports-paused=?0"
            );
        }

        #[test]
        fn unknown_members_are_ignored_and_bad_ones_refused() {
            assert_eq!(
                EffectiveClientSettings::parse_header(
                    "later=1;x, reports-paused, poll-ceiling=2000"
                ),
                Ok(EffectiveClientSettings {
                    poll_ceiling_ms: Some(2000),
                    reports_paused: true
                })
            );
            for bad in [
                "poll-ceiling=10",
                "poll-ceiling=99999999",
                "poll-ceiling=\"1000\"",
                "reports-paused=1",
                "reports-paused=(?1)",
                "=",
                "poll-ceiling=-5",
            ] {
                assert!(
                    EffectiveClientSettings::parse_header(bad).is_err(),
                    "{bad} was accepted"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_and_agents_override_their_tenant_field_by_field() {
        assert!(ClientSettings::default().check().is_ok());
        for ms in [999, 3_600_001, 0] {
            let s = ClientSettings {
                poll_ceiling_ms: Some(ms),
                reports_paused: None,
            };
            assert!(s.check().unwrap_err().contains("between 1000"));
        }
        let tenant = ClientSettings {
            poll_ceiling_ms: Some(60_000),
            reports_paused: Some(true),
        };
        let agent = ClientSettings {
            poll_ceiling_ms: None,
            reports_paused: Some(false),
        };
        assert_eq!(
            agent.over(tenant).effective(),
            EffectiveClientSettings {
                poll_ceiling_ms: Some(60_000),
                reports_paused: false
            }
        );
        assert_eq!(
            ClientSettings::default().effective(),
            EffectiveClientSettings::default()
        );
        let body: Result<ClientSettings, _> = serde_json::from_str(r#"{"poll_ceiling":5}"#);
        assert!(body.is_err(), "a misspelt field is refused");
    }
}
