//! `switchboard serve`'s settings: precedence, bounds and the messages that name them.

use super::*;

#[test]
fn flags_beat_file_and_file_beats_defaults() {
    let dir = tempfile_dir();
    let path = dir.join("sb.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:9999\"\nheartbeat_seconds = 5\nretention_seconds = 60\n\
         sample_interval_seconds = 2.5\nhistory_samples = 100\n",
    )
    .unwrap();
    let args = ServeArgs {
        config: Some(path),
        listen: Some("127.0.0.1:1234".parse().unwrap()),
        ..Default::default()
    };
    let s = resolve(args).unwrap();
    assert_eq!(s.listen.port(), 1234, "the flag wins over the file");
    assert_eq!(
        s.config.heartbeat,
        Duration::from_secs(5),
        "the file wins over the default"
    );
    assert_eq!(s.config.retention, Duration::from_secs(60));
    assert_eq!(s.config.sample_interval, Duration::from_millis(2_500));
    assert_eq!(s.config.history_samples, 100);
    let bad = resolve(ServeArgs {
        history_samples: Some(1),
        ..Default::default()
    });
    assert!(bad.is_err_and(|e| e.to_string().contains("history_samples")));
    assert_eq!(
        s.config.idempotency_ttl,
        Duration::from_secs(86_400),
        "default kept"
    );
}

#[test]
fn unknown_file_keys_and_short_key_ttl_are_errors() {
    let dir = tempfile_dir();
    let path = dir.join("bad.toml");
    std::fs::write(&path, "lisen = \"127.0.0.1:1\"\n").unwrap();
    let err = resolve(ServeArgs {
        config: Some(path),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(format!("{err:#}").contains("lisen"), "{err:#}");
    let err = resolve(ServeArgs {
        idempotency_ttl_seconds: Some(10),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("at least 86400"));
    for (ttl, rotation) in [(Some(59), None), (Some(1801), None), (None, Some(3599))] {
        let err = resolve(ServeArgs {
            access_token_ttl_seconds: ttl,
            signing_key_rotation_seconds: rotation,
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(err.to_string().contains("_seconds must be"), "{err}");
    }
}

#[test]
fn access_token_settings_from_flags_and_file() {
    let dir = tempfile_dir();
    let path = dir.join("tokens.toml");
    std::fs::write(
        &path,
        "access_token_ttl_seconds = 300\nsigning_key_rotation_seconds = 86400\n",
    )
    .unwrap();
    let s = resolve(ServeArgs {
        config: Some(path.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.config.access_token_ttl, Duration::from_secs(300));
    assert_eq!(s.config.signing_key_rotation, Duration::from_secs(86_400));
    // A flag wins over the file.
    let s = resolve(ServeArgs {
        config: Some(path),
        access_token_ttl_seconds: Some(1800),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.config.access_token_ttl, Duration::from_secs(1800));
}

#[test]
fn rate_limits_from_flags_and_file() {
    let dir = tempfile_dir();
    let path = dir.join("limits.toml");
    std::fs::write(
        &path,
        "rate_limit_per_second = 0.5\nrate_limit_burst = 3\ntenant_rate_limit_per_second = 0\n",
    )
    .unwrap();
    let s = resolve(ServeArgs {
        config: Some(path),
        rate_limit_burst: Some(5),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        (s.config.rate_limit.per_second, s.config.rate_limit.burst),
        (0.5, 5),
        "the flag wins over the file"
    );
    assert!(!s.config.tenant_rate_limit.is_on(), "0 turns it off");
    let defaults = resolve(ServeArgs::default()).unwrap();
    assert!(defaults.config.rate_limit.is_on() && defaults.config.tenant_rate_limit.is_on());
    for (args, what) in [
        (
            ServeArgs {
                rate_limit_per_second: Some(-1.0),
                ..Default::default()
            },
            "rate_limit_per_second",
        ),
        (
            ServeArgs {
                tenant_rate_limit_burst: Some(0),
                ..Default::default()
            },
            "tenant_rate_limit_burst",
        ),
    ] {
        let err = resolve(args).err().unwrap();
        assert!(err.to_string().contains(what), "{err:#}");
    }
}

#[test]
fn webhook_settings_from_flags_and_file() {
    let dir = tempfile_dir();
    let path = dir.join("hooks.toml");
    std::fs::write(
        &path,
        "webhook_allow_loopback = true\nwebhook_retry_schedule = \"1, 2,3\"\n\
         webhook_disable_after_seconds = 120\n",
    )
    .unwrap();
    let s = resolve(ServeArgs {
        config: Some(path),
        operator_token_file: Some(dir.join("op/operator-token")),
        ..Default::default()
    })
    .unwrap();
    let w = &s.config.webhooks;
    assert!(w.allow_loopback);
    assert_eq!(
        w.retry_schedule,
        [1, 2, 3].map(Duration::from_secs).to_vec()
    );
    assert_eq!(w.disable_after, Duration::from_secs(120));
    assert_eq!(
        w.key_file.as_deref(),
        Some(dir.join("op/webhook-key").as_path()),
        "beside the operator token by default"
    );
    let defaults = resolve(ServeArgs::default()).unwrap().config.webhooks;
    assert!(!defaults.allow_loopback);
    assert_eq!(defaults.retry_schedule.len(), 7, "Svix's schedule");
    for bad in ["", "5,,6", "0", "1,x", "604801"] {
        let err = resolve(ServeArgs {
            webhook_retry_schedule: Some(bad.to_owned()),
            ..Default::default()
        })
        .err()
        .unwrap_or_else(|| panic!("{bad:?} is refused"));
        assert!(err.to_string().contains("webhook_retry_schedule"), "{err}");
    }
    let err = resolve(ServeArgs {
        webhook_disable_after_seconds: Some(10),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("webhook_disable_after_seconds"));
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sb-cli-test-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn uuid_like() -> String {
    format!("{}-{:?}", std::process::id(), std::thread::current().id()).replace(['(', ')'], "")
}

#[test]
fn a_region_is_a_short_name_or_refused() {
    let region = |r: &str| {
        resolve(ServeArgs {
            region: Some(r.to_owned()),
            ..Default::default()
        })
    };
    assert_eq!(region("EU").unwrap().config.region.as_deref(), Some("EU"));
    for bad in ["", "E U", "eu-west/1", &"x".repeat(33)] {
        let e = region(bad).map(drop).unwrap_err().to_string();
        assert!(e.contains("region must be"), "{bad:?}: {e}");
    }
    assert_eq!(resolve(ServeArgs::default()).unwrap().config.region, None);
}
