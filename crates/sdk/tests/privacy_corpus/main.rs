//! The privacy gate against a corpus of its own: families of format-valid
//! synthetic secrets and personal data (`secrets.rs`) and of benign near misses
//! (`benign.rs`), each sample put into a few message contexts and checked as a
//! `message` with the built-in schemas, as `switchboard agent check` does.
//!
//! It prints recall per family and the false-positive rate per benign family, and
//! asserts: recall ≥ 99 % overall and ≥ 95 % in every family, false positives ≤ 1 %,
//! a refusal of the right class (credential or PII) covering the secret, and no
//! printed form of a refusal or finding holding the secret.

mod benign;
mod secrets;
mod synth;

use serde_json::json;
use switchboard_sdk::privacy::{Blocked, DEFAULT_SCHEMAS, Gate, Rule};

use secrets::{Class, FAMILIES};
use synth::Rng;

const SAMPLES_PER_FAMILY: usize = 20;
const BENIGN_PER_FAMILY: usize = 40;

/// Where a sample sits in a message; `{}` is the sample.
const CONTEXTS: &[&str] = &[
    "{}",
    "here it is: {} (please keep it)",
    "config:\n  value: \"{}\"\nend",
    "`{}`",
    "[{}], ok",
];

fn gate() -> Gate {
    Gate::new()
        .load_schemas(DEFAULT_SCHEMAS)
        .expect("built-in schemas load")
}

fn check(gate: &Gate, text: &str) -> Result<(), Blocked> {
    gate.check("message", json!({ "text": text })).map(|_| ())
}

/// Every printed form of a refusal: the error, its Debug, and each refusal and
/// finding on its own.
fn printed(blocked: &Blocked) -> Vec<String> {
    let mut out = vec![
        blocked.to_string(),
        format!("{blocked:?}"),
        format!("{blocked:#?}"),
    ];
    for refusal in &blocked.refusals {
        out.push(refusal.to_string());
        out.push(format!("{refusal:?}"));
    }
    for finding in blocked.findings() {
        out.push(finding.to_string());
        out.push(format!("{finding:?}"));
    }
    out
}

fn class_of(rule: Rule) -> Class {
    match rule {
        Rule::Credential(_) => Class::Credential,
        Rule::Pii(_) => Class::Pii,
    }
}

#[test]
fn corpus_recall_and_false_positive_rate() {
    let gate = gate();
    let mut rng = Rng::new(0x5eed_2026_1129);
    assert!(FAMILIES.len() >= 25, "at least 25 secret families");
    assert!(benign::BENIGN.len() >= 15, "at least 15 benign families");

    let (mut found_total, mut total) = (0usize, 0usize);
    let mut weak = Vec::new();
    let mut leaks = Vec::new();
    println!(
        "{:<32} {:>8}  misses (rules found instead)",
        "family", "recall"
    );
    for family in FAMILIES {
        let mut found = 0;
        let mut misses = Vec::new();
        for i in 0..SAMPLES_PER_FAMILY {
            let sample = (family.make)(&mut rng);
            let context = CONTEXTS[i % CONTEXTS.len()];
            let (before, after) = context.split_once("{}").expect("a placeholder");
            let text = format!("{before}{}{after}", sample.text);
            let at = before.len() + sample.text.find(&sample.secret).expect("secret in text");
            let span = at..at + sample.secret.len();
            let verdict = check(&gate, &text);
            let hit = verdict.as_ref().err().is_some_and(|blocked| {
                blocked.findings().any(|f| {
                    class_of(f.rule) == family.class
                        && f.span.start < span.end
                        && span.start < f.span.end
                })
            });
            if hit {
                found += 1;
            } else {
                let rules: Vec<&str> = verdict
                    .as_ref()
                    .err()
                    .map(|b| b.findings().map(|f| f.rule.code()).collect())
                    .unwrap_or_default();
                misses.push(format!("{} chars{rules:?}", sample.secret.len()));
            }
            if let Err(blocked) = &verdict {
                for shown in printed(blocked) {
                    if shown.contains(&sample.secret) {
                        leaks.push(format!("{}: {shown}", family.name));
                    }
                }
            }
        }
        let recall = found as f64 / SAMPLES_PER_FAMILY as f64;
        println!(
            "{:<32} {:>7.1}%  {}",
            family.name,
            recall * 100.0,
            misses.join(", ")
        );
        if recall < 0.95 {
            weak.push(family.name);
        }
        found_total += found;
        total += SAMPLES_PER_FAMILY;
    }

    let (mut flagged_total, mut benign_total) = (0usize, 0usize);
    println!("\n{:<32} {:>8}  flagged as", "benign family", "FP rate");
    for family in benign::BENIGN {
        let mut flagged = Vec::new();
        for i in 0..BENIGN_PER_FAMILY {
            let sample = (family.make)(&mut rng);
            let context = CONTEXTS[i % CONTEXTS.len()];
            let text = context.replacen("{}", &sample, 1);
            if let Err(blocked) = check(&gate, &text) {
                let rules: Vec<&str> = blocked.findings().map(|f| f.rule.code()).collect();
                flagged.push(format!("{text:?} {rules:?}"));
            }
        }
        println!(
            "{:<32} {:>7.1}%  {}",
            family.name,
            flagged.len() as f64 * 100.0 / BENIGN_PER_FAMILY as f64,
            flagged.join(" | ")
        );
        flagged_total += flagged.len();
        benign_total += BENIGN_PER_FAMILY;
    }

    let recall = found_total as f64 / total as f64;
    let fp_rate = flagged_total as f64 / benign_total as f64;
    println!(
        "\noverall recall {:.2}% ({found_total}/{total} over {} families); \
         false positives {:.2}% ({flagged_total}/{benign_total} over {} families)",
        recall * 100.0,
        FAMILIES.len(),
        fp_rate * 100.0,
        benign::BENIGN.len()
    );
    assert!(leaks.is_empty(), "a refusal printed its secret: {leaks:#?}");
    assert!(recall >= 0.99, "recall {recall:.4} is under 99%");
    assert!(weak.is_empty(), "families under 95% recall: {weak:?}");
    assert!(
        fp_rate <= 0.01,
        "false-positive rate {fp_rate:.4} is over 1%"
    );
}
