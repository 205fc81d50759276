//! Sign-in to a remote team server (`--server-url`): the authorization code flow
//! with PKCE through the system browser and a loopback redirect (the SDK's
//! [`SignIn`]); the operator consents on the server's own page. The resulting
//! refresh token stays in this process: it mints the one-time console link the
//! window opens (a session cookie in the webview, never a token in the page),
//! and is revoked when the app quits, which ends that console session too.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use switchboard_sdk::login::MemoryRefreshStore;
use switchboard_sdk::signin::SignIn;
use switchboard_sdk::{Client, Token};
use tauri::Url;

/// The app as the consent page names it.
pub(crate) const CLIENT_ID: &str = "switchboard-desktop";
/// How long the operator has to finish in the browser.
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A signed-in remote console.
pub(crate) struct Remote {
    /// The one-time login link the window opens first.
    pub(crate) entry: Url,
    refresh: Arc<MemoryRefreshStore>,
    home: Url,
}

/// Signs in to `home` through the system browser; the window's first address.
pub(crate) async fn sign_in(home: &Url) -> anyhow::Result<Remote> {
    let signin = SignIn::start(home.as_str(), CLIENT_ID, None)
        .await
        .context("starting the sign-in")?;
    let url = signin.authorize_url().to_string();
    eprintln!("switchboard-desktop: sign in to {home} in your browser: {url}");
    if let Err(error) = webbrowser::open(&url) {
        eprintln!(
            "switchboard-desktop: could not open a browser ({error}); open the address above"
        );
    }
    let http = reqwest::Client::new();
    let signed_in = tokio::time::timeout(SIGN_IN_TIMEOUT, signin.finish(&http))
        .await
        .context("nobody finished the sign-in in the browser within 10 minutes")?
        .context("signing in")?;
    tracing::info!(scope = %signed_in.scope, "signed in to the remote server");
    let refresh = Arc::new(MemoryRefreshStore::new(signed_in.refresh_token));
    let client = client(home, &refresh)?;
    let link = client
        .login_link(false)
        .await
        .context("asking the server for a console link")?;
    let entry = home.join(&link.path).context("the console link")?;
    Ok(Remote {
        entry,
        refresh,
        home: home.clone(),
    })
}

fn client(home: &Url, refresh: &Arc<MemoryRefreshStore>) -> anyhow::Result<Client> {
    let store: Arc<dyn switchboard_sdk::login::RefreshTokenStore> = refresh.clone();
    Client::builder()
        .build_with_login(home.as_str(), store)
        .context("a client for the remote server")
}

impl Remote {
    /// Ends the sign-in on the server (RFC 7009): its console session ends too.
    pub(crate) async fn sign_out(self) {
        use switchboard_sdk::login::RefreshTokenStore as _;
        let token: Token = match self.refresh.load() {
            Ok(token) => token,
            Err(_) => return,
        };
        let http = reqwest::Client::new();
        match switchboard_sdk::login::revoke(&http, self.home.as_str(), &token).await {
            Ok(()) => tracing::info!("signed out of the remote server"),
            Err(error) => tracing::warn!(%error, "could not sign out of the remote server"),
        }
    }
}
