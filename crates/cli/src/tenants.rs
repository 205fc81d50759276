//! `switchboard tenants create NAME | list`: the deployment admin's tenants (the
//! token `switchboard serve` writes carries the `admin` scope). `create` prints the
//! new tenant's operator token once: hand it to the team that runs the tenant.

use anyhow::Context;
use clap::{Args, Subcommand};
use switchboard_sdk::proto::{TenantCreated, TenantSummary};

#[derive(Args, Debug)]
pub(crate) struct TenantsCli {
    #[command(subcommand)]
    command: TenantsCommand,
    #[command(flatten)]
    operator: crate::operator::OperatorArgs,
    /// Print the answer as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum TenantsCommand {
    /// Create a tenant; prints its operator token, once.
    Create {
        /// 1 to 64 characters of A-Z a-z 0-9 . _ -, unique in the deployment.
        name: String,
    },
    /// Every tenant with its number of agents.
    List,
}

pub(crate) fn run(cli: TenantsCli) -> anyhow::Result<u8> {
    let client = cli.operator.client()?;
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    match cli.command {
        TenantsCommand::Create { name } => {
            let created = rt.block_on(client.create_tenant(&name))?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&created)?);
            } else {
                print!("{}", render_created(&created, client.base_url().as_str()));
            }
        }
        TenantsCommand::List => {
            let tenants = rt.block_on(client.tenants())?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&tenants)?);
            } else {
                print!("{}", render_list(&tenants));
            }
        }
    }
    Ok(0)
}

fn render_created(t: &TenantCreated, server: &str) -> String {
    format!(
        "created tenant {} ({})\n\
         its operator token (shown once; the server keeps only a hash):\n\
         \n    {}\n\n\
         its operators log in to the console at {} with it, or use it as \
         SWITCHBOARD_TOKEN\n",
        t.name,
        t.tenant_id,
        t.operator_token,
        server.trim_end_matches('/'),
    )
}

fn render_list(tenants: &[TenantSummary]) -> String {
    let width = tenants
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<width$}  {:>6}  {:<36}  created\n",
        "name", "agents", "id"
    );
    for t in tenants {
        let created = t
            .created_at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<width$}  {:>6}  {:<36}  {created}\n",
            t.name,
            t.agents,
            t.tenant_id.to_string()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_lines_up_under_its_header() {
        let at = time::macros::datetime!(2026-12-03 10:00 UTC);
        let tenants = [
            TenantSummary {
                tenant_id: "0193a1b2-0000-7000-8000-000000000001".parse().unwrap(),
                name: "default".to_owned(),
                created_at: at,
                agents: 12,
            },
            TenantSummary {
                tenant_id: "0193a1b2-0000-7000-8000-000000000002".parse().unwrap(),
                name: "research-team".to_owned(),
                created_at: at,
                agents: 0,
            },
        ];
        let text = render_list(&tenants);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("name           agents  id"), "{text}");
        assert!(
            lines[1].starts_with("default            12  0193a1b2-0000-7000-8000-000000000001"),
            "{text}"
        );
        assert!(lines[2].contains("research-team       0  "), "{text}");
        assert!(lines[2].ends_with("2026-12-03T10:00:00Z"), "{text}");
    }
}
