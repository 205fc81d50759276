//! `switchboard doctor`: the checks of `switchboard_server::doctor` on the settings
//! `switchboard serve` would use (same flags, environment and TOML file), printed
//! for a person or, with `--json`, for a program. Exit status: 0 ok, 1 warnings,
//! 2 errors (a configuration that does not even resolve is an error).

use anyhow::Context;
use clap::Args;
use switchboard_server::doctor::{Finding, Listening, Report, Status, Thresholds, diagnose};

use crate::serve::{ServeArgs, resolve};

#[derive(Args, Debug)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Print the report as one JSON object: {"status", "findings": [{"check",
    /// "status", "message", "fix"}]}.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: DoctorArgs) -> anyhow::Result<u8> {
    let report = match resolve(args.serve) {
        Ok(settings) => {
            let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            let listening = Listening {
                addr: settings.listen,
                tls: settings.tls.clone(),
                allow_plain_http: settings.allow_plain_http,
            };
            rt.block_on(diagnose(
                &settings.config,
                listening,
                &Thresholds::default(),
            ))
        }
        Err(e) => Report {
            status: Status::Error,
            findings: vec![Finding {
                check: "config",
                status: Status::Error,
                message: format!("{e:#}"),
                fix: Some("correct the flag, environment variable or TOML key named".into()),
            }],
        },
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(report.status.exit_code())
}

fn text(report: &Report) -> String {
    let count = |s| report.findings.iter().filter(|f| f.status == s).count();
    let mut out = format!(
        "switchboard doctor: {} ok, {} warning(s), {} error(s)\n",
        count(Status::Ok),
        count(Status::Warning),
        count(Status::Error)
    );
    for f in &report.findings {
        let status = match f.status {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Error => "error",
        };
        out.push_str(&format!("{status:<8} {:<19} {}\n", f.check, f.message));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("{:<28} fix: {fix}\n", ""));
        }
    }
    out
}
