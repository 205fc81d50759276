//! Remote client settings (`/ops/client-settings`): what the agents' SDKs obey, for
//! the whole tenant and per agent: the polling ceiling (the longest a consumer
//! waits between two looks at its inbox) and whether client reports are paused.
//! An SDK picks a change up from its next response. Operators with write access
//! edit a row inline; a field left empty inherits (an agent from the tenant, the
//! tenant from the SDK's own configuration).
//!
//! Hooks: `#client-settings-table`, `tr[data-settings]` (`tenant` or the agent's
//! name), `td[data-col=ceiling|reports|effective|updated]`,
//! `button[data-edit-settings]`, `#settings-form`, `#settings-ceiling` (seconds),
//! `#settings-reports` (`inherit`, `paused`, `sending`), `#settings-save`,
//! `#settings-clear`, `#settings-result`, `#settings-error`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{
    AgentSummary, ClientSettings, ClientSettingsList, EffectiveClientSettings, StoredClientSettings,
};

use super::{error_box, loading};
use crate::api;
use crate::context::Auth;
use crate::format;
use crate::live::Live;

/// A row of the table: the tenant's (no agent) or one agent's.
#[derive(Clone, PartialEq)]
struct Row {
    /// `tenant`, or the agent's name: the `data-settings` hook and the path.
    key: String,
    label: String,
    own: Option<StoredClientSettings>,
    /// `None` for the tenant's row (what its agents obey differs per agent).
    effective: Option<EffectiveClientSettings>,
}

impl Row {
    fn path(&self) -> String {
        if self.effective.is_none() {
            "/api/v1/ops/client-settings".to_owned()
        } else {
            format!("/api/v1/ops/agents/{}/client-settings", self.key)
        }
    }

    fn settings(&self) -> ClientSettings {
        self.own.as_ref().map(|s| s.settings).unwrap_or_default()
    }
}

fn rows(list: &ClientSettingsList, agents: &[AgentSummary]) -> Vec<Row> {
    let mut rows = vec![Row {
        key: "tenant".to_owned(),
        label: "Every agent (tenant)".to_owned(),
        own: list.tenant.clone(),
        effective: None,
    }];
    rows.extend(agents.iter().map(|a| {
        Row {
            key: a.name.clone(),
            label: a.name.clone(),
            own: list
                .agents
                .iter()
                .find(|s| s.agent_id == Some(a.agent_id))
                .cloned(),
            effective: Some(list.effective_for(a.agent_id)),
        }
    }));
    rows
}

fn ceiling(ms: Option<u64>, unset: &str) -> String {
    ms.map(|ms| format::age(ms as f64 / 1000.0))
        .unwrap_or_else(|| unset.to_owned())
}

fn reports(paused: Option<bool>, unset: &str) -> String {
    match paused {
        Some(true) => "paused".to_owned(),
        Some(false) => "sending".to_owned(),
        None => unset.to_owned(),
    }
}

/// What the form's fields say, or why not.
fn parse_form(ceiling_s: &str, reports: &str) -> Result<ClientSettings, String> {
    let ceiling_s = ceiling_s.trim();
    let poll_ceiling_ms = if ceiling_s.is_empty() {
        None
    } else {
        let s: f64 = ceiling_s
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or_else(|| {
                format!("the polling ceiling {ceiling_s:?} is not a number of seconds")
            })?;
        Some((s * 1000.0).round() as u64)
    };
    let reports_paused = match reports {
        "paused" => Some(true),
        "sending" => Some(false),
        _ => None,
    };
    Ok(ClientSettings {
        poll_ceiling_ms,
        reports_paused,
    })
}

/// The client-settings table under the Agents table.
#[component]
pub(crate) fn ClientSettingsPanel() -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let data = LocalResource::new(move || {
        live.version.get();
        async move {
            let list = api::get::<ClientSettingsList>("/api/v1/ops/client-settings").await?;
            let agents = api::get::<Vec<AgentSummary>>("/api/v1/ops/agents").await?;
            Ok::<_, api::ApiError>(rows(&list, &agents))
        }
    });
    let editing = RwSignal::new(None::<Row>);
    let ceiling_input = RwSignal::new(String::new());
    let reports_input = RwSignal::new("inherit".to_owned());
    let outcome = RwSignal::new(None::<Result<String, String>>);

    let edit = move |row: Row| {
        let s = row.settings();
        ceiling_input.set(
            s.poll_ceiling_ms
                .map(|ms| (ms as f64 / 1000.0).to_string())
                .unwrap_or_default(),
        );
        reports_input.set(reports(s.reports_paused, "inherit"));
        outcome.set(None);
        editing.set(Some(row));
    };
    let save = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let Some(row) = editing.get_untracked() else {
            return;
        };
        let settings = match parse_form(
            &ceiling_input.get_untracked(),
            &reports_input.get_untracked(),
        ) {
            Ok(s) => s,
            Err(e) => return outcome.set(Some(Err(e))),
        };
        spawn_local(async move {
            let r = api::send::<_, StoredClientSettings>("PUT", &row.path(), &settings).await;
            outcome.set(Some(match r {
                Ok(_) => {
                    editing.set(None);
                    live.version.update(|v| *v += 1);
                    Ok(format!(
                        "Saved for {}: agents pick it up from their next response.",
                        row.label
                    ))
                }
                Err(e) => Err(e.detail),
            }));
        });
    };
    let clear = move |_| {
        let Some(row) = editing.get_untracked() else {
            return;
        };
        spawn_local(async move {
            let r = api::send_empty("DELETE", &row.path()).await;
            outcome.set(Some(match r {
                Ok(()) => {
                    editing.set(None);
                    live.version.update(|v| *v += 1);
                    Ok(format!("Cleared for {}: it inherits again.", row.label))
                }
                Err(e) => Err(e.detail),
            }));
        });
    };

    let row_view = move |row: Row| {
        let s = row.settings();
        let inherit = if row.effective.is_none() {
            "SDK's own"
        } else {
            "inherit"
        };
        let effective = row.effective.map(|e| {
            format!(
                "{}, reports {}",
                ceiling(e.poll_ceiling_ms, "SDK's own ceiling"),
                if e.reports_paused {
                    "paused"
                } else {
                    "sending"
                }
            )
        });
        let updated = row
            .own
            .as_ref()
            .map(|o| format!("{} by {}", format::when(o.updated_at), o.updated_by))
            .unwrap_or_else(|| "–".to_owned());
        let paused_class = if s.reports_paused == Some(true) {
            "error"
        } else {
            ""
        };
        let (key, label) = (row.key.clone(), row.label.clone());
        let can_write = auth.can_write();
        view! {
            <tr data-settings=key.clone()>
                <td>{label}</td>
                <td data-col="ceiling">{ceiling(s.poll_ceiling_ms, inherit)}</td>
                <td data-col="reports" class=paused_class>{reports(s.reports_paused, inherit)}</td>
                <td data-col="effective">{effective.unwrap_or_else(|| "–".to_owned())}</td>
                <td data-col="updated" class="muted">{updated}</td>
                <td class="row-actions">
                    {can_write.then(|| view! {
                        <button type="button" data-edit-settings=key.clone()
                            on:click=move |_| edit(row.clone())>"Edit…"</button>
                    })}
                </td>
            </tr>
        }
        .into_any()
    };

    view! {
        <section id="client-settings">
            <h2>"Client settings"</h2>
            <p class="muted">
                "What the agents' SDKs obey: the longest wait between two looks at the inbox, and whether they send client reports (pause them during an incident). An SDK picks a change up from its next response; an empty field inherits."
            </p>
            {move || outcome.get().map(|o| match o {
                Ok(m) => view! { <p id="settings-result" class="ok" role="status">{m}</p> }.into_any(),
                Err(m) => view! { <p id="settings-error" class="error" role="alert">{m}</p> }.into_any(),
            })}
            {move || editing.get().map(|row| view! {
                <form id="settings-form" class="filters" data-settings=row.key.clone() on:submit=save>
                    <strong>{row.label.clone()}</strong>
                    <label for="settings-ceiling">
                        "Polling ceiling (s)"
                        <input id="settings-ceiling" type="text" inputmode="decimal"
                            placeholder="inherit" size="8"
                            prop:value=move || ceiling_input.get()
                            on:input=move |ev| ceiling_input.set(event_target_value(&ev)) />
                    </label>
                    <label for="settings-reports">
                        "Client reports"
                        <select id="settings-reports"
                            prop:value=move || reports_input.get()
                            on:change=move |ev| reports_input.set(event_target_value(&ev))>
                            <option value="inherit">"inherit"</option>
                            <option value="sending">"sending"</option>
                            <option value="paused">"paused"</option>
                        </select>
                    </label>
                    <button type="submit" id="settings-save">"Save"</button>
                    <button type="button" id="settings-clear" on:click=clear>"Clear"</button>
                    <button type="button" on:click=move |_| editing.set(None)>"Cancel"</button>
                </form>
            })}
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(rows)) => view! {
                    <table id="client-settings-table">
                        <thead><tr>
                            <th>"Applies to"</th><th>"Polling ceiling"</th><th>"Client reports"</th>
                            <th>"In effect"</th><th>"Updated"</th><th></th>
                        </tr></thead>
                        <tbody>{rows.into_iter().map(row_view).collect::<Vec<_>>()}</tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}
