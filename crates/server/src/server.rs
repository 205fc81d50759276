//! Opening the server (database, tenant, operator token) and serving it until the
//! caller's shutdown signal.

use crate::app::running::Running;
use crate::app::{AppState, StateInner};
use crate::config::Config;
use crate::history::History;
use crate::http::auth::{admin_scopes, generate_token, hash_token};
use crate::http::router;
use crate::hub::Hub;
use crate::metrics::Metrics;
use crate::store::sqlite::SqliteStore;
use crate::store::{Store, StoreError};
use crate::workers::Workers;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("database: {0}")]
    Store(#[from] StoreError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "unsupported database URL {0:?}: use sqlite://PATH, postgres://USER:PASSWORD@HOST/DATABASE \
         or mysql://USER:PASSWORD@HOST/DATABASE"
    )]
    UnsupportedUrl(String),
    #[error(
        "this build has no {0} driver (the desktop app embeds SQLite only): serve this \
         database with the `switchboard serve` of the CLI, or use sqlite://PATH"
    )]
    BackendNotBuilt(&'static str),
    #[error("webhooks: {0}")]
    Webhooks(String),
}

pub struct Server {
    state: AppState,
    operator_token: String,
}

impl Server {
    /// Opens the database (creating it and applying migrations), the default tenant and
    /// the operator token.
    pub async fn open(config: Config) -> Result<Self, StartError> {
        let url = config.database_url.clone();
        let store: Arc<dyn Store> = if url.starts_with("sqlite:") {
            if let Some(dir) = crate::store::sqlite::file_of(&url)
                .and_then(|file| Path::new(file).parent())
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir).map_err(|source| StartError::Io {
                    what: format!("creating {}", dir.display()),
                    source,
                })?;
            }
            let store =
                SqliteStore::open(&url, &config.sqlite_synchronous, config.hooks.store()).await?;
            store.set_group_commit(config.sqlite_group_commit);
            Arc::new(store)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            let store = Arc::new(
                crate::store::postgres::PgStore::open(
                    &url,
                    config.database_max_connections,
                    config.hooks.store(),
                )
                .await?,
            );
            #[cfg(not(feature = "postgres"))]
            return Err(StartError::BackendNotBuilt("PostgreSQL"));
            #[cfg(feature = "postgres")]
            store
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            #[cfg(feature = "mysql")]
            let store = Arc::new(
                crate::store::mysql::MySqlStore::open(
                    &url.replacen("mariadb://", "mysql://", 1),
                    config.database_max_connections,
                    config.hooks.store(),
                )
                .await?,
            );
            #[cfg(not(feature = "mysql"))]
            return Err(StartError::BackendNotBuilt("MariaDB / MySQL"));
            #[cfg(feature = "mysql")]
            store
        } else {
            return Err(StartError::UnsupportedUrl(crate::config::redact_url(&url)));
        };
        let now = config.clock.now_ms();
        // Alive before the first request: the keys it holds in flight are its own.
        store.beat(now).await?;
        let abandoned = store.idem_recover().await?;
        if abandoned > 0 {
            tracing::info!(
                abandoned,
                "forgot idempotency keys of requests that died with the last process"
            );
        }
        let interrupted = store.jobs_interrupted(now).await?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "bulk jobs of the last process stopped part way; their audit rows say how far"
            );
        }
        let tenant = store.ensure_tenant("default", now).await?;
        let operator_token = operator_token(store.as_ref(), &config, tenant, now).await?;
        let history = History::new(config.sample_interval, config.history_samples);
        let lookup = config
            .hooks
            .webhook_lookup
            .clone()
            .unwrap_or_else(|| Arc::new(crate::webhooks::target::SystemLookup));
        let webhooks = crate::webhooks::Webhooks::open(&config.webhooks, lookup)
            .map_err(StartError::Webhooks)?;
        let foreign = store.callbacks_sealed_elsewhere(webhooks.key.id()).await?;
        if foreign > 0 {
            tracing::warn!(
                callbacks = foreign,
                key = webhooks.key.id(),
                "webhook callbacks sealed with another webhook key cannot be delivered by this \
                 instance: give every instance the same --webhook-key-file"
            );
        }
        let archive =
            match &config.archive_dir {
                Some(dir) => Some(crate::archive::ArchiveDir::open(dir).map_err(|source| {
                    StartError::Io {
                        what: format!(
                            "the archive directory {} cannot be written (create it, or give the \
                         server's user write access to it)",
                            dir.display()
                        ),
                        source,
                    }
                })?),
                None => None,
            };
        let signing = crate::oauth::keys::SigningKeys::open(
            store.as_ref(),
            &webhooks.key,
            config.signing_key_rotation,
            now,
        )
        .await?;
        let running = Running::new(store.instance_name());
        let replays = crate::access::replays::Replays::new(store.as_ref());
        replays.load(store.as_ref(), now).await?;
        // Every wake-up takes one road: the store hands its commits' (and the
        // other instances') to the hub.
        let hub = Hub::new();
        store.deliver_wakes_to(Arc::new(hub.clone()));
        let state = AppState::new(StateInner {
            archive,
            retention_held: Default::default(),
            webhooks: Arc::new(webhooks),
            store,
            history,
            tasks: tokio_util::task::TaskTracker::new(),
            lookups: crate::app::lookups::Lookups::new(config.clock.clone()),
            signing,
            limiter: crate::access::rate_limit::Limiter::new(
                config.rate_limit,
                config.tenant_rate_limit,
                config.clock.clone(),
            )
            .with_addresses(config.address_rate_limit),
            running,
            replays,
            config,
            hub,
            metrics: Metrics::new(),
            tenant,
            shutdown: CancellationToken::new(),
        });
        Ok(Self {
            state,
            operator_token,
        })
    }

    /// The operator token of the default tenant, which is also the deployment
    /// admin's (scope `admin`: it creates tenants).
    pub fn operator_token(&self) -> &str {
        &self.operator_token
    }

    /// The handle an embedding app uses (see [`crate::embed`]).
    pub fn console(&self) -> crate::embed::Console {
        crate::embed::Console::new(self.state.clone(), &self.operator_token)
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn router(&self) -> axum::Router {
        router(self.state.clone())
    }

    /// The background workers, for tests that drive them with a manual clock.
    pub fn workers(&self) -> Workers {
        Workers::new(self.state.clone())
    }

    /// The webhook delivery worker, for tests that drive it with a manual clock.
    pub fn deliverer(&self) -> crate::workers::deliverer::Deliverer {
        crate::workers::deliverer::Deliverer::new(self.state.clone())
    }

    /// Serves until `shutdown` resolves, then closes SSE streams, lets in-flight
    /// requests finish, stops the workers and closes the database. `listener` is a
    /// `tokio::net::TcpListener`, or a [`crate::tls::TlsListener`] around one.
    pub async fn serve<L>(
        self,
        listener: L,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()>
    where
        L: axum::serve::Listener<Addr = std::net::SocketAddr>,
        crate::http::PeerAddr:
            for<'a> axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>,
    {
        let state = self.state.clone();
        crate::webhooks::check_listen(&state.webhooks.config, listener.local_addr()?)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // The background rooms (scavenger, retention, jobs, expiry, sampler, beat,
        // deliverer, other instances' wake-ups, idle rate-limit buckets), each
        // supervised; they end with `state.shutdown`.
        let rooms = crate::workers::start(&state);
        let cancel = state.shutdown.clone();
        // The peer's address reaches handlers as `ConnectInfo` (device logins show
        // operators where a request came from).
        let app = self
            .router()
            .into_make_service_with_connect_info::<crate::http::PeerAddr>();
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                tracing::info!("shutting down: closing streams, finishing requests");
                cancel.cancel();
            })
            .await;
        state.shutdown.cancel();
        rooms.stopped().await;
        // Bulk jobs see the cancel, record where they stopped, and end.
        state.tasks.close();
        state.tasks.wait().await;
        if let Err(e) = state.replays.save(state.store.as_ref(), state.now()).await {
            tracing::warn!(error = %e, "the signed requests' nonces seen last could not be saved");
        }
        state.store.close().await;
        tracing::info!("database closed");
        result
    }
}

/// Reuses the token in the configured file while it is valid; otherwise mints one and
/// writes it there with mode 0600.
async fn operator_token(
    store: &dyn Store,
    config: &Config,
    tenant: switchboard_proto::TenantId,
    now: i64,
) -> Result<String, StartError> {
    if let Some(path) = &config.operator_token_file
        && let Ok(existing) = std::fs::read_to_string(path)
    {
        let existing = existing.trim().to_owned();
        let hash = hash_token(&existing);
        if let Some(rec) = store.token(&hash).await?
            && rec.tenant_id == tenant
            && rec.agent_id.is_none()
        {
            // A token written before the `admin` scope existed becomes the admin's.
            let mut scopes = rec.scopes;
            let missing: Vec<String> = admin_scopes()
                .into_iter()
                .filter(|s| !scopes.contains(s))
                .collect();
            if !missing.is_empty() {
                scopes.extend(missing);
                store.set_token_scopes(&hash, &scopes).await?;
                tracing::info!(
                    scopes = scopes.join(" "),
                    "the operator token now carries every scope of the deployment admin"
                );
            }
            return Ok(existing);
        }
    }
    let token = generate_token("sb_op_");
    store
        .insert_token(
            &hash_token(&token),
            tenant,
            &admin_scopes(),
            "operator",
            None,
            now,
        )
        .await?;
    if let Some(path) = &config.operator_token_file {
        crate::config::write_private(path, format!("{token}\n").as_bytes(), true).map_err(
            |source| StartError::Io {
                what: format!("writing the operator token to {}", path.display()),
                source,
            },
        )?;
    }
    Ok(token)
}
