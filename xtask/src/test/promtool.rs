//! The Prometheus recording rules (`deploy/prometheus/rules.yml`), which give the
//! seed's metric names over our series: `promtool check rules` on them, `promtool
//! test rules` on their unit tests (`rules_test.yml`, sample series with exact
//! expected values), and the Grafana dashboard (`deploy/grafana/switchboard.json`)
//! checked against them: every panel queries a recorded name, and every recorded
//! name has a panel. `cargo xtask promtool` runs this alone; `cargo xtask test` as
//! a step. promtool comes with Debian's `prometheus` package ([`PACKAGE`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;

/// The Debian package that carries `promtool` (Debian has no lighter one).
pub(crate) const PACKAGE: &str = "prometheus";

const RULES: &str = "deploy/prometheus/rules.yml";
const RULES_TEST: &str = "deploy/prometheus/rules_test.yml";
const DASHBOARD: &str = "deploy/grafana/switchboard.json";

/// Checks the rules, runs their unit tests and checks the dashboard against them.
pub(crate) fn check() -> Result<()> {
    let root = cmd::root();
    match cmd::stdout(Command::new("promtool").arg("--version")) {
        Some(version) => eprintln!("{}", version.lines().next().unwrap_or_default()),
        None => bail!(
            "promtool is missing: it comes with Debian's {PACKAGE} package \
             (`cargo xtask prereqs` installs it)"
        ),
    }
    cmd::run(
        Command::new("promtool")
            .args(["check", "rules", RULES])
            .current_dir(&root),
    )?;
    cmd::run(
        Command::new("promtool")
            .args(["test", "rules", RULES_TEST])
            .current_dir(&root),
    )?;
    dashboard(&root)
}

/// Every panel of the dashboard queries a name the rules record, and every
/// recorded name is on a panel.
fn dashboard(root: &Path) -> Result<()> {
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {path}"))
    };
    let recorded = recorded(&read(RULES)?);
    let json: serde_json::Value =
        serde_json::from_str(&read(DASHBOARD)?).with_context(|| format!("parsing {DASHBOARD}"))?;
    let mut queried = BTreeSet::new();
    for panel in json["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            queried.insert(metric_of(expr).to_owned());
        }
    }
    let problems = mismatches(&recorded, &queried);
    if !problems.is_empty() {
        bail!(
            "{DASHBOARD} and {RULES} disagree:\n  {}",
            problems.join("\n  ")
        );
    }
    eprintln!(
        "{DASHBOARD}: {} panels, each on a name {RULES} records",
        queried.len()
    );
    Ok(())
}

/// The names of the recording rules (`- record: NAME` lines) of a rule file.
fn recorded(rules: &str) -> BTreeSet<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record:"))
        .map(|name| name.trim().to_owned())
        .collect()
}

/// The metric name a query starts with: `x{a="b"}` → `x`.
fn metric_of(expr: &str) -> &str {
    let expr = expr.trim();
    let end = expr
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(expr.len());
    &expr[..end]
}

/// What the dashboard queries that no rule records, and what no panel shows.
fn mismatches(recorded: &BTreeSet<String>, queried: &BTreeSet<String>) -> Vec<String> {
    let unknown = queried
        .difference(recorded)
        .map(|q| format!("a panel queries `{q}`, which no rule records"));
    let unshown = recorded
        .difference(queried)
        .map(|r| format!("no panel shows `{r}`"));
    unknown.chain(unshown).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_dashboard_check_reads_names_and_finds_both_mismatches() {
        let rules = "groups:\n  - name: g\n    rules:\n      - record: a_rate\n        \
                     expr: sum(rate(x[5m]))\n      - record: b_ms\n        expr: y\n      \
                     - record: b_ms\n        expr: z\n";
        assert_eq!(recorded(rules), set(&["a_rate", "b_ms"]));
        assert_eq!(metric_of(r#" b_ms{job=~"$job",tenant=~"$tenant"}"#), "b_ms");
        assert_eq!(metric_of("a_rate"), "a_rate");
        assert!(mismatches(&set(&["a_rate", "b_ms"]), &set(&["b_ms", "a_rate"])).is_empty());
        assert_eq!(
            mismatches(&set(&["a_rate", "b_ms"]), &set(&["b_ms", "c"])),
            vec![
                "a panel queries `c`, which no rule records".to_owned(),
                "no panel shows `a_rate`".to_owned(),
            ]
        );
    }

    #[test]
    fn the_shipped_dashboard_matches_the_shipped_rules() {
        dashboard(&cmd::root()).unwrap();
    }
}
