//! Remote client settings as the SDK holds them: what the server last said in
//! `Switchboard-Client-Settings` (every response to an agent carries it). The
//! consumer's schedule watches them and the reporter reads them; see
//! [`crate::Client::client_settings`].

use reqwest::header::HeaderMap;
use switchboard_proto::{CLIENT_SETTINGS_HEADER, EffectiveClientSettings};
use tokio::sync::watch;

/// The latest settings of one agent's token, shared by the clients derived with it.
#[derive(Debug)]
pub(crate) struct RemoteSettings(watch::Sender<EffectiveClientSettings>);

impl Default for RemoteSettings {
    fn default() -> Self {
        Self(watch::channel(EffectiveClientSettings::default()).0)
    }
}

impl RemoteSettings {
    pub(crate) fn current(&self) -> EffectiveClientSettings {
        *self.0.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<EffectiveClientSettings> {
        self.0.subscribe()
    }

    /// Takes the settings a response carries. A response without them (an older
    /// server, a request refused before its token was read) changes nothing; a value
    /// that does not parse is logged and ignored.
    pub(crate) fn observe(&self, headers: &HeaderMap) {
        let Some(value) = headers.get(CLIENT_SETTINGS_HEADER) else {
            return;
        };
        let parsed = value
            .to_str()
            .map_err(|_| "not visible ASCII".to_owned())
            .and_then(EffectiveClientSettings::parse_header);
        let settings = match parsed {
            Ok(settings) => settings,
            Err(reason) => {
                tracing::debug!(
                    target: "switchboard_sdk::settings",
                    reason,
                    "ignoring a client-settings header"
                );
                return;
            }
        };
        let changed = self
            .0
            .send_if_modified(|current| std::mem::replace(current, settings) != settings);
        if changed {
            tracing::info!(
                target: "switchboard_sdk::settings",
                poll_ceiling_ms = settings.poll_ceiling_ms,
                reports_paused = settings.reports_paused,
                "remote client settings changed"
            );
        }
    }
}
