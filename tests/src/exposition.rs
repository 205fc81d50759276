//! Reading the Prometheus text exposition of `/metrics` in tests.

/// Every sample of `name` (the sample's own name, e.g. `events_acked_total`):
/// its labels as printed (empty without any) and its value.
pub fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => {
                    let (labels, value) = r.split_once("} ")?;
                    (labels.to_owned(), value)
                }
                None => (String::new(), rest.strip_prefix(' ')?),
            };
            Some((labels, value.trim().parse().ok()?))
        })
        .collect()
}

/// The sum of every series of `name`; `None` when there is none.
pub fn sum(text: &str, name: &str) -> Option<f64> {
    let all = samples(text, name);
    (!all.is_empty()).then(|| all.iter().map(|(_, v)| v).sum())
}

/// The value of the series of `name` whose labels include every `label="value"` of
/// `labels`.
pub fn labelled(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples(text, name).into_iter().find_map(|(have, v)| {
        labels
            .iter()
            .all(|(k, want)| have.split(',').any(|kv| kv == format!("{k}=\"{want}\"")))
            .then_some(v)
    })
}

/// The tenants named by the `tenant` labels of `name`'s series.
pub fn tenants(text: &str, name: &str) -> Vec<String> {
    let mut all: Vec<String> = samples(text, name)
        .into_iter()
        .filter_map(|(labels, _)| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix("tenant=\""))
                .map(|t| t.trim_end_matches('"').to_owned())
        })
        .collect();
    all.sort();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_with_and_without_labels() {
        let text = "# TYPE a counter\na_total{tenant=\"t1\"} 2\na_total{tenant=\"t2\",outcome=\"x\"} 3\n\
                    b 1.5\nb_total 9\n# EOF\n";
        assert_eq!(sum(text, "a_total"), Some(5.0));
        assert_eq!(sum(text, "b"), Some(1.5), "not b_total");
        assert_eq!(sum(text, "c"), None);
        assert_eq!(labelled(text, "a_total", &[("outcome", "x")]), Some(3.0));
        assert_eq!(labelled(text, "a_total", &[("tenant", "t1")]), Some(2.0));
        assert_eq!(labelled(text, "a_total", &[("tenant", "t3")]), None);
        assert_eq!(tenants(text, "a_total"), ["t1", "t2"]);
    }
}
