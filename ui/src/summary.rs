//! Text the console shows about the server it talks to.

use switchboard_proto::{Capabilities, QueueTableHealth};

/// One line about the server, e.g. `Switchboard server 0.1.0 · sqlite backend · API v1`.
pub(crate) fn server_line(caps: &Capabilities) -> String {
    format!(
        "Switchboard server {} · {} backend · API {}",
        caps.server_version, caps.backend, caps.api_version
    )
}

/// Vacuum is falling behind on the inbox table: ten times the dead rows the
/// recommended autovacuum settings (threshold 1000, scale factor 0.01, see the
/// README) would let pile up before a vacuum starts.
pub(crate) fn vacuum_behind(h: &QueueTableHealth) -> bool {
    h.dead_tuples > 10 * (1000 + h.live_tuples / 100)
}

/// Longer than any transaction of the server's own runs (statement timeout 15 s,
/// idle-in-transaction timeout 60 s): someone else's, and it holds vacuum back.
pub(crate) const LONG_TRANSACTION_SECONDS: f64 = 60.0;

/// What the operator should do about the queue table, if anything.
pub(crate) fn queue_table_advice(h: &QueueTableHealth) -> Option<String> {
    let long = h.oldest_transaction_age_seconds > LONG_TRANSACTION_SECONDS;
    match (long, vacuum_behind(h)) {
        (true, _) => Some(
            "A transaction has been open for a long time, and vacuum cannot remove dead rows \
             while it is: find it in pg_stat_activity (oldest xact_start) and end it."
                .to_owned(),
        ),
        (false, true) => Some(format!(
            "{} dead rows wait for vacuum in the inbox table: check that autovacuum runs \
             (the README lists the settings for the events table).",
            h.dead_tuples
        )),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_proto::Limits;

    fn health(dead: u64, live: u64, oldest: f64) -> QueueTableHealth {
        QueueTableHealth {
            dead_tuples: dead,
            live_tuples: live,
            vacuum_age_seconds: Some(30.0),
            oldest_transaction_age_seconds: oldest,
        }
    }

    #[test]
    fn vacuum_is_behind_past_ten_times_its_trigger() {
        // Trigger at 1000 + 1 % of live: 1,000 for an empty table, 11,000 for 1M rows.
        assert!(!vacuum_behind(&health(10_000, 0, 0.0)));
        assert!(vacuum_behind(&health(10_001, 0, 0.0)));
        assert!(!vacuum_behind(&health(110_000, 1_000_000, 0.0)));
        assert!(vacuum_behind(&health(110_001, 1_000_000, 0.0)));
    }

    #[test]
    fn advice_names_the_long_transaction_first() {
        assert_eq!(queue_table_advice(&health(5, 100, 2.0)), None);
        let long = queue_table_advice(&health(5, 100, 61.0)).expect("advice");
        assert!(long.contains("pg_stat_activity"), "{long}");
        let both = queue_table_advice(&health(50_000, 100, 600.0)).expect("advice");
        assert!(
            both.contains("pg_stat_activity"),
            "the cause comes first: {both}"
        );
        let behind = queue_table_advice(&health(50_000, 100, 0.0)).expect("advice");
        assert!(behind.starts_with("50000 dead rows"), "{behind}");
        assert!(behind.contains("autovacuum"), "{behind}");
    }

    #[test]
    fn names_version_backend_and_api() {
        let caps = Capabilities {
            api_version: "v1".into(),
            server_version: "0.1.0".into(),
            backend: "sqlite".into(),
            limits: Limits {
                max_body_bytes: 5 << 20,
                max_page_size: 1000,
                default_page_size: 100,
                max_claim_batch: 100,
                min_lease_seconds: 1,
                max_lease_seconds: 3600,
                default_lease_seconds: 60,
                max_delay_seconds: 3600,
                max_attempts_limit: 100,
                default_max_attempts: 5,
                idempotency_ttl_seconds: 86_400,
                heartbeat_seconds: 30,
                webhooks: Default::default(),
            },
        };
        assert_eq!(
            server_line(&caps),
            "Switchboard server 0.1.0 · sqlite backend · API v1"
        );
    }
}
