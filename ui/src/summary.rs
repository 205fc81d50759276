//! Text the console shows about the server it talks to.

use switchboard_proto::Capabilities;

/// One line about the server, e.g. `Switchboard server 0.1.0 · sqlite backend · API v1`.
pub(crate) fn server_line(caps: &Capabilities) -> String {
    format!(
        "Switchboard server {} · {} backend · API {}",
        caps.server_version, caps.backend, caps.api_version
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_proto::Limits;

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
            },
        };
        assert_eq!(
            server_line(&caps),
            "Switchboard server 0.1.0 · sqlite backend · API v1"
        );
    }
}
