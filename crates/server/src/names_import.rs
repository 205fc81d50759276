//! Planning a legacy name import: every name through the canonical-name pipeline;
//! names that collide (same skeleton, with each other or with a registered name)
//! go to the oldest `created_at` (then the smaller original, for a total order), and
//! the others get the first free deterministic suffix `-2`, `-3`, … A pure function
//! of its input and of the skeletons already taken, so a dry run reports exactly
//! what the real run does.

pub use crate::store::{Planned, Taken};
use std::collections::{BTreeMap, HashSet};
use switchboard_proto::{ImportReport, ImportedName, LegacyName, RejectedName};

/// Suffixes tried per name before it is reported as rejected.
const MAX_SUFFIX: u32 = 1000;

/// `taken`: what the registry already holds. A name registered before from the same
/// original is reported as `already_registered`, so running an import twice
/// changes nothing the second time.
pub fn plan(names: &[LegacyName], taken: &Taken) -> (Vec<Planned>, ImportReport) {
    let mut report = ImportReport::default();
    let mut valid = Vec::new();
    for (index, n) in names.iter().enumerate() {
        match switchboard_names::canonicalize(&n.name) {
            Ok(c) => valid.push((index, n, c)),
            Err(e) => report.rejected.push(RejectedName {
                index,
                original: n.name.clone(),
                code: e.code().to_owned(),
                reason: e.to_string(),
            }),
        }
    }
    // Oldest first; ties by original name, then position: deterministic.
    valid.sort_by(|a, b| (a.1.created_at, &a.1.name, a.0).cmp(&(b.1.created_at, &b.1.name, b.0)));
    let mut used: Taken = taken.clone();
    let mut out = Vec::new();
    let mut registered = BTreeMap::new();
    for (index, n, c) in valid {
        let created_at = (n.created_at.unix_timestamp_nanos() / 1_000_000) as i64;
        let (name, skeleton, collided_with) = match used.get(&c.skeleton) {
            None => (c.canonical.clone(), c.skeleton.clone(), None),
            // Registered before from this same original.
            Some((held, original)) if *original == n.name => {
                (held.clone(), c.skeleton.clone(), None)
            }
            Some((holder, _)) => match suffixed(&c.canonical, &n.name, &used) {
                Some((name, skeleton)) => (name, skeleton, Some(holder.clone())),
                None => {
                    report.rejected.push(RejectedName {
                        index,
                        original: n.name.clone(),
                        code: "name_confusable".to_owned(),
                        reason: format!("no free suffix up to -{MAX_SUFFIX}"),
                    });
                    continue;
                }
            },
        };
        let already = taken
            .get(&skeleton)
            .is_some_and(|(held, original)| *held == name && *original == n.name);
        used.insert(skeleton.clone(), (name.clone(), n.name.clone()));
        registered.insert(
            index,
            ImportedName {
                index,
                original: n.name.clone(),
                name: name.clone(),
                collided_with: collided_with.filter(|_| !already),
                already_registered: already,
            },
        );
        if already {
            continue;
        }
        out.push(Planned {
            name,
            skeleton,
            original: n.name.clone(),
            created_at,
        });
    }
    report.registered = registered.into_values().collect();
    report.rejected.sort_by_key(|r| r.index);
    (out, report)
}

/// `base-N` for the smallest N ≥ 2 whose skeleton is free (or holds this same
/// original from an earlier import), shortening `base` so the result stays within
/// the name length limit.
fn suffixed(base: &str, original: &str, used: &Taken) -> Option<(String, String)> {
    let mut seen = HashSet::new();
    for n in 2..=MAX_SUFFIX {
        let suffix = format!("-{n}");
        let room = switchboard_names::MAX_CHARS.saturating_sub(suffix.chars().count());
        let stem: String = base.chars().take(room).collect();
        let candidate = format!("{stem}{suffix}");
        if let Ok(c) = switchboard_names::canonicalize(&candidate)
            && used.get(&c.skeleton).is_none_or(|(_, o)| o == original)
            && seen.insert(c.skeleton.clone())
        {
            return Some((c.canonical, c.skeleton));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn legacy(name: &str, at: time::OffsetDateTime) -> LegacyName {
        LegacyName {
            name: name.to_owned(),
            created_at: at,
        }
    }

    #[test]
    fn the_oldest_keeps_the_name_and_the_rest_get_the_next_free_suffix() {
        let names = [
            legacy("PayPal", datetime!(2024-03-01 0:00 UTC)),
            legacy("paypal", datetime!(2023-01-01 0:00 UTC)),
            legacy("p\u{430}ypal", datetime!(2022-01-01 0:00 UTC)),
            legacy("\u{441}\u{43e}\u{440}", datetime!(2025-01-01 0:00 UTC)),
            legacy("paypal-2", datetime!(2020-01-01 0:00 UTC)),
            legacy("two words", datetime!(2020-01-01 0:00 UTC)),
            legacy("cop", datetime!(2021-01-01 0:00 UTC)),
        ];
        let (planned, report) = plan(&names, &Taken::new());
        let got: Vec<(usize, &str, Option<&str>)> = report
            .registered
            .iter()
            .map(|r| (r.index, r.name.as_str(), r.collided_with.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (0, "paypal-3", Some("paypal")),
                (1, "paypal", None),
                (3, "\u{441}\u{43e}\u{440}-2", Some("cop")),
                (4, "paypal-2", None),
                (6, "cop", None),
            ],
            "{report:?}"
        );
        // Mixed script and spaces are refused with the pipeline's reason; the
        // all-Cyrillic "сор" is a valid name confusable with the older "cop": it is
        // suffixed.
        let rejected: Vec<(usize, &str)> = report
            .rejected
            .iter()
            .map(|r| (r.index, r.code.as_str()))
            .collect();
        assert_eq!(rejected, [(2, "name_invalid"), (5, "name_invalid")]);
        assert_eq!(planned.len(), 5);
        // The same input plans the same way (a dry run reports the real run).
        assert_eq!(
            plan(&names, &Taken::new()),
            (planned.clone(), report.clone())
        );
        // Run again over what it registered: everything is already there.
        let taken: Taken = planned
            .iter()
            .map(|p| (p.skeleton.clone(), (p.name.clone(), p.original.clone())))
            .collect();
        let (again, second) = plan(&names, &taken);
        assert!(again.is_empty(), "{again:?}");
        let kept: Vec<bool> = second
            .registered
            .iter()
            .map(|r| r.already_registered)
            .collect();
        assert!(kept.iter().all(|k| *k), "{second:?}");
        let same: Vec<&str> = second.registered.iter().map(|r| r.name.as_str()).collect();
        let first: Vec<&str> = report.registered.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(same, first);
    }

    #[test]
    fn registered_names_are_older_than_any_import() {
        let taken = Taken::from([(
            switchboard_names::canonicalize("build-bot")
                .unwrap()
                .skeleton,
            ("build-bot".to_owned(), "build-bot".to_owned()),
        )]);
        let (_, report) = plan(
            &[legacy("Build-Bot", datetime!(1999-01-01 0:00 UTC))],
            &taken,
        );
        assert_eq!(report.registered[0].name, "build-bot-2");
        assert_eq!(
            report.registered[0].collided_with.as_deref(),
            Some("build-bot")
        );
    }

    #[test]
    fn suffixes_keep_within_the_length_limit() {
        let long = "a".repeat(64);
        let taken = Taken::from([(
            switchboard_names::canonicalize(&long).unwrap().skeleton,
            (long.clone(), "legacy".to_owned()),
        )]);
        let (_, report) = plan(&[legacy(&long, datetime!(2020-01-01 0:00 UTC))], &taken);
        let name = &report.registered[0].name;
        assert_eq!(name.chars().count(), 64);
        assert!(name.ends_with("-2"), "{name}");
    }
}
