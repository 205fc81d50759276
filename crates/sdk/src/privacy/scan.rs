//! Runs every scanner over one string and merges their matches.
//!
//! Overlaps: a specific credential match (a JWT, a prefixed token …) hides any
//! high-entropy match that overlaps it, so one secret gives one finding with the
//! most precise rule. Everything else is kept.

use std::ops::Range;

use super::Config;
use super::finding::{Credential, Rule};
use super::{credentials, entropy, pii};

/// One match inside one string; the caller adds the JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hit {
    pub(super) rule: Rule,
    pub(super) span: Range<usize>,
}

/// All matches in `text`, ordered by position.
pub(super) fn scan(text: &str, config: &Config) -> Vec<Hit> {
    let mut hits: Vec<Hit> = credentials::scan(text)
        .into_iter()
        .map(|(c, span)| Hit {
            rule: Rule::Credential(c),
            span,
        })
        .collect();
    if let Some(rule) = &config.entropy {
        for span in entropy::scan(text, rule) {
            let covered = hits.iter().any(|h| overlaps(&h.span, &span));
            if !covered {
                hits.push(Hit {
                    rule: Rule::Credential(Credential::HighEntropy),
                    span,
                });
            }
        }
    }
    hits.extend(
        pii::scan(text, config.scan_emails)
            .into_iter()
            .map(|(p, span)| Hit {
                rule: Rule::Pii(p),
                span,
            }),
    );
    hits.sort_by(|a, b| {
        (a.span.start, a.span.end, a.rule).cmp(&(b.span.start, b.span.end, b.rule))
    });
    hits.dedup();
    hits
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}
