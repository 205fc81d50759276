//! Agents: one row per agent with its inbox depth by status; click through to its
//! inbox or quarantine. Operators who may write create agents (the token is shown
//! once, as the `switchboard agent login` line to paste), revoke every token of
//! one, and delete one (typing its name to confirm). Below: the tenant's credentials (`credentials.rs`), each agent's client side
//! (`client.rs`), the remote client settings (`settings.rs`), and for the
//! deployment admin the tenants (`tenants.rs`).
//!
//! Hooks: `#agents-table`, `tr[data-agent]`, `button[data-revoke]` (the agent's
//! name), `#revoke-confirm`, `#revoke-result`, `#revoke-error`, `#agent-form`,
//! `#agent-name`, `#agent-create`, `#agent-created` with `code#agent-login`,
//! `#agent-error`, `button[data-delete]` (the agent's name), `#delete-name`,
//! `#delete-confirm`, `#delete-cancel`, `#delete-result`, `#delete-error`,
//! `button[data-read-token]` (the agent's name), `#read-token-created` with
//! `code#read-token`, `#read-token-error`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{
    AgentCreated, AgentDeleted, AgentSummary, CreateAgent, CreateToken, TokenCreated,
};

use super::client::ClientSide;
use super::credentials::{CredentialsPanel, Revoker};
use super::settings::ClientSettingsPanel;
use super::signatures::SignaturesPanel;
use super::tenants::TenantsPanel;
use super::{error_box, loading};
use crate::api;
use crate::context::{Auth, Link};
use crate::format;
use crate::live::Live;
use crate::route::{EventQuery, href};

/// Deleting an agent: the row asks for its name to be typed, then deletes.
#[derive(Clone, Copy)]
struct Deleter {
    /// The agent waiting for confirmation, and what has been typed.
    asking: RwSignal<Option<(String, String)>>,
    outcome: RwSignal<Option<Result<String, String>>>,
}

impl Deleter {
    fn new() -> Self {
        Self {
            asking: RwSignal::new(None),
            outcome: RwSignal::new(None),
        }
    }

    fn confirm(self, live: Live) {
        let Some((name, typed)) = self.asking.get_untracked() else {
            return;
        };
        if typed != name {
            return;
        }
        spawn_local(async move {
            let path = format!("/api/v1/ops/agents/{}", crate::route::encode(&name));
            let r = api::delete::<AgentDeleted>(&path).await;
            self.asking.set(None);
            self.outcome.set(Some(match r {
                Ok(d) => Ok(format!(
                    "Deleted {}: {} credential{} revoked, {} open event{} purged; the name is \
                     free for a new agent",
                    d.name,
                    d.revoked,
                    if d.revoked == 1 { "" } else { "s" },
                    d.purged,
                    if d.purged == 1 { "" } else { "s" },
                )),
                Err(e) => Err(e.detail),
            }));
            live.version.update(|v| *v += 1);
        });
    }

    /// The row's delete button, or the typed confirmation.
    fn buttons(self, name: String) -> AnyView {
        let live = expect_context::<Live>();
        let asking_this = {
            let name = name.clone();
            move || {
                self.asking
                    .with(|a| a.as_ref().is_some_and(|(n, _)| *n == name))
            }
        };
        view! {
            {move || if asking_this() {
                let expected = name.clone();
                let matches = move || {
                    self.asking.with(|a| a.as_ref().is_some_and(|(_, t)| *t == expected))
                };
                view! {
                    // Bound to what was typed: the live table re-renders this row,
                    // and a new input must not lose the operator's typing.
                    <input id="delete-name" type="text" autocomplete="off" spellcheck="false"
                        placeholder="type the agent's name" aria-label="Type the agent's name to delete it"
                        prop:value=move || {
                            self.asking.with(|a| a.as_ref().map(|(_, t)| t.clone()).unwrap_or_default())
                        }
                        on:input=move |ev| {
                            let typed = event_target_value(&ev);
                            self.asking.update(|a| if let Some((_, t)) = a { *t = typed });
                        } />
                    <button type="button" id="delete-confirm" class="danger"
                        disabled=move || !matches()
                        on:click=move |_| self.confirm(live)>"Delete now"</button>
                    <button type="button" id="delete-cancel"
                        on:click=move |_| self.asking.set(None)>"Cancel"</button>
                }.into_any()
            } else {
                let name = name.clone();
                view! {
                    <button type="button" class="danger" data-delete=name.clone()
                        title="Delete this agent: revoke its tokens, purge its open events, free its name"
                        on:click=move |_| {
                            self.outcome.set(None);
                            self.asking.set(Some((name.clone(), String::new())));
                        }>
                        "Delete…"
                    </button>
                }.into_any()
            }}
        }
        .into_any()
    }
}

/// Mints an agent's read-only token (`agent:{id}:read`: poll, subscribe, the
/// snapshot, its rooms and memory records, nothing that changes anything), shown
/// once. One per page.
#[derive(Clone, Copy)]
struct ReadToken {
    /// (agent, token) or the error.
    outcome: RwSignal<Option<Result<(String, String), String>>>,
}

impl ReadToken {
    fn new() -> Self {
        Self {
            outcome: RwSignal::new(None),
        }
    }

    fn mint(&self, agent: String) {
        let outcome = self.outcome;
        let live = expect_context::<Live>();
        let body = CreateToken {
            scopes: vec![format!("agent:{agent}:read")],
            label: format!("read-only {agent}"),
        };
        spawn_local(async move {
            let r = api::send::<_, TokenCreated>("POST", "/api/v1/ops/tokens", &body).await;
            outcome.set(Some(r.map(|t| (agent, t.token)).map_err(|e| e.detail)));
            live.version.update(|v| *v += 1);
        });
    }

    fn button(&self, agent: String) -> AnyView {
        let this = *self;
        view! {
            <button type="button" data-read-token=agent.clone()
                title="A token that may only read this agent's inbox, rooms and memory records"
                on:click=move |_| this.mint(agent.clone())>"Read token"</button>
        }
        .into_any()
    }

    fn view(&self) -> impl IntoView + use<> {
        let outcome = self.outcome;
        move || {
            outcome.get().map(|o| match o {
                Ok((agent, token)) => view! {
                    <div id="read-token-created" class="ok" role="status">
                        <p>{format!("Read-only token of {agent} (shown only now): it may poll, \
                            subscribe, read the snapshot, its rooms and memory records, and \
                            change nothing.")}</p>
                        <pre><code id="read-token">{token}</code></pre>
                    </div>
                }
                .into_any(),
                Err(m) => {
                    view! { <p id="read-token-error" class="error" role="alert">{m}</p> }.into_any()
                }
            })
        }
    }
}

fn row(
    a: AgentSummary,
    revoker: Option<Revoker>,
    deleter: Option<Deleter>,
    reader: Option<ReadToken>,
) -> AnyView {
    let q = EventQuery {
        agent: Some(a.name.clone()),
        ..EventQuery::default()
    };
    let c = a.counts.clone();
    let online = if a.subscribers > 0 {
        format!("online ({})", a.subscribers)
    } else {
        "offline".to_owned()
    };
    let name = a.name.clone();
    let buttons = revoker.map(|r| {
        r.buttons(
            a.name.clone(),
            format!("/api/v1/ops/agents/{}/revoke", a.name),
            a.name.clone(),
        )
    });
    view! {
        <tr data-agent=a.name.clone()>
            <td><Link href=href("/inbox", &q)>{name}</Link></td>
            <td data-col="online" class={if a.subscribers > 0 { "ok" } else { "muted" }}>{online}</td>
            <td data-col="pending" class="num">{c.pending}</td>
            <td data-col="claimed" class="num">{c.claimed}</td>
            <td data-col="quarantined" class="num">
                <Link href=href("/quarantine", &q)>{c.quarantined}</Link>
            </td>
            <td data-col="completed" class="num">{c.completed}</td>
            <td data-col="cursor" class="num" title="head cursor (oldest valid cursor)">
                {format!("{} ({})", a.head_cursor, a.oldest_cursor)}
            </td>
            <td data-col="oldest-pending">
                {a.oldest_pending_age_seconds.map(format::age).unwrap_or_else(|| "–".to_owned())}
            </td>
            <td data-col="last-seen">
                {a.last_seen_at.map(format::when).unwrap_or_else(|| "never".to_owned())}
            </td>
            <td class="row-actions">
                {reader.map(|r| r.button(a.name.clone()))}
                {buttons}
                {deleter.map(|d| d.buttons(a.name.clone()))}
            </td>
        </tr>
    }
    .into_any()
}

/// The command an agent's machine runs to log in with a new agent's token.
fn login_line(token: &str) -> String {
    let origin = web_sys::window()
        .and_then(|w| w.location().origin().ok())
        .unwrap_or_default();
    format!("switchboard agent login --server {origin} --token {token}")
}

/// Create an agent: its token is shown once, as the login line to paste.
#[component]
fn CreateAgentForm() -> impl IntoView {
    let live = expect_context::<Live>();
    let name = RwSignal::new(String::new());
    let outcome = RwSignal::new(None::<Result<AgentCreated, String>>);
    let create = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let body = CreateAgent {
            name: name.get_untracked().trim().to_owned(),
        };
        spawn_local(async move {
            let r = api::send::<_, AgentCreated>("POST", "/api/v1/ops/agents", &body).await;
            if r.is_ok() {
                name.set(String::new());
                live.version.update(|v| *v += 1);
            }
            outcome.set(Some(r.map_err(|e| e.detail)));
        });
    };
    view! {
        <form id="agent-form" class="filters" on:submit=create>
            <label for="agent-name">
                "New agent"
                <input id="agent-name" type="text" placeholder="build-bot" size="24"
                    maxlength="64" prop:value=move || name.get()
                    on:input=move |ev| name.set(event_target_value(&ev)) />
            </label>
            <button type="submit" id="agent-create">"Create"</button>
        </form>
        {move || outcome.get().map(|o| match o {
            Ok(a) => view! {
                <div id="agent-created" class="ok" role="status">
                    <p>{format!("Created {}. On its machine, run (the token is shown only now):", a.name)}</p>
                    <pre><code id="agent-login">{login_line(&a.token)}</code></pre>
                </div>
            }.into_any(),
            Err(m) => view! { <p id="agent-error" class="error" role="alert">{m}</p> }.into_any(),
        })}
    }
}

#[component]
pub(crate) fn AgentsPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<Vec<AgentSummary>>("/api/v1/ops/agents")
    });
    let revoker = Revoker::new();
    let deleter = Deleter::new();
    let reader = ReadToken::new();
    let deleted = move || {
        deleter.outcome.get().map(|o| match o {
            Ok(m) => view! { <p id="delete-result" class="ok" role="status">{m}</p> }.into_any(),
            Err(m) => view! { <p id="delete-error" class="error" role="alert">{m}</p> }.into_any(),
        })
    };
    view! {
        <section id="agents">
            <h1>"Agents"</h1>
            {move || auth.can_write().then(|| view! { <CreateAgentForm/> })}
            {revoker.outcome_view("revoke")}
            {reader.view()}
            {deleted}
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(agents)) if agents.is_empty() => view! {
                    <p class="empty">
                        "No agents yet. Create one above (or with "
                        <code>"POST /api/v1/ops/agents"</code>
                        "); it appears here as soon as it exists."
                    </p>
                }.into_any(),
                Some(Ok(agents)) => view! {
                    <table id="agents-table">
                        <thead>
                            <tr>
                                <th>"Agent"</th><th>"Online"</th><th class="num">"Pending"</th>
                                <th class="num">"Claimed"</th><th class="num">"Quarantined"</th>
                                <th class="num">"Completed"</th><th class="num">"Cursor"</th>
                                <th>"Oldest pending"</th><th>"Last seen"</th><th></th>
                            </tr>
                        </thead>
                        <tbody>{agents.into_iter().map(|a| {
                            let w = auth.can_write();
                            row(a, w.then_some(revoker), w.then_some(deleter), w.then_some(reader))
                        }).collect::<Vec<_>>()}</tbody>
                    </table>
                }.into_any(),
            }}
            <CredentialsPanel revoker=revoker/>
            <SignaturesPanel/>
            <ClientSide/>
            <ClientSettingsPanel/>
            <TenantsPanel/>
        </section>
    }
}
