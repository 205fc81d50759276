//! The Prometheus recording rules (`deploy/prometheus/rules.yml`, the seed's metric
//! names) read series that a real scrape has: every series a rule selects is in
//! `/metrics`, labelled `tenant`, so renaming one fails here rather than silently
//! in someone's Prometheus. What the rules compute is tested by `promtool test
//! rules` on sample series (`cargo xtask promtool`).

use std::collections::BTreeSet;

use serde_json::json;
use switchboard_tests::TestServer;
use switchboard_tests::exposition::{labelled, samples};

use crate::support::send;

const RULES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/prometheus/rules.yml"
));

/// The series the rules' expressions select: each name written right before a
/// `{` (its labels) or a `[` (a range), outside comments.
fn selected(rules: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in rules.lines().filter(|l| !l.trim().starts_with('#')) {
        let mut start = None;
        for (i, c) in line.char_indices() {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                start.get_or_insert(i);
                continue;
            }
            if let Some(s) = start.take()
                && (c == '{' || c == '[')
            {
                names.insert(line[s..i].to_owned());
            }
        }
    }
    names
}

#[tokio::test]
async fn the_recording_rules_read_series_a_scrape_has() {
    let names = selected(RULES);
    assert_eq!(
        names,
        [
            "delivery_latency_seconds_bucket",
            "fencing_rejections_total",
            "idempotency_cache_hits_total",
            "idempotent_requests_total",
            "inbox_depth",
            "lease_renewal_latency_seconds_bucket",
            "lease_returns_total",
        ]
        .map(String::from)
        .into(),
        "the series rules.yml reads"
    );

    let server = TestServer::start().await;
    let op = server.operator();
    server.agent("alice").await;
    send(&op, "alice", json!("hello")).await;
    let text = op.metrics_text().await.expect("metrics");
    for name in &names {
        let series = samples(&text, name);
        assert!(!series.is_empty(), "no {name} in /metrics:\n{text}");
        for (labels, _) in &series {
            assert!(
                labels.split(',').any(|l| l.starts_with("tenant=\"")),
                "{name}{{{labels}}} has no tenant label"
            );
        }
        if name.ends_with("_bucket") {
            assert!(
                series
                    .iter()
                    .any(|(l, _)| l.split(',').any(|l| l == "le=\"+Inf\"")),
                "{name} has no +Inf bucket:\n{text}"
            );
        }
    }
    assert_eq!(
        labelled(
            &text,
            "inbox_depth",
            &[("agent", "alice"), ("status", "pending")]
        ),
        Some(1.0),
        "inbox_depth_per_agent's source:\n{text}"
    );
}
