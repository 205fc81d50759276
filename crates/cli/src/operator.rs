//! What the operator's commands (`names`, `tenants`) share: which server, which
//! token, which CA.

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub(crate) struct OperatorArgs {
    /// The server [default: http://127.0.0.1:7700].
    #[arg(long, env = "SWITCHBOARD_SERVER", global = true)]
    server: Option<String>,
    /// A file holding an operator token [default: the one `switchboard serve` writes].
    /// `SWITCHBOARD_TOKEN` wins when set.
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// PEM file of CA certificates to trust besides the system's: a server whose
    /// certificate a private CA signed.
    #[arg(long, env = "SWITCHBOARD_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
}

impl OperatorArgs {
    /// A client of the server with the operator token.
    pub(crate) fn client(&self) -> anyhow::Result<switchboard_sdk::Client> {
        let token = match std::env::var("SWITCHBOARD_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
        {
            Some(t) => t,
            None => {
                let path = self
                    .token_file
                    .clone()
                    .unwrap_or_else(switchboard_server::Config::default_operator_token_file);
                std::fs::read_to_string(&path)
                    .with_context(|| {
                        format!(
                            "reading the operator token from {} (set SWITCHBOARD_TOKEN or \
                             --token-file)",
                            path.display()
                        )
                    })?
                    .trim()
                    .to_owned()
            }
        };
        let server = self
            .server
            .clone()
            .unwrap_or_else(|| "http://127.0.0.1:7700".to_owned());
        crate::client_builder(self.ca_file.as_deref())?
            .build(&server, token.as_str())
            .with_context(|| format!("cannot use the server URL {server}"))
    }
}
