//! Registration: the body's checks, then the challenge. Nothing is stored unless
//! the endpoint proves that it holds the secret.

use super::{CHALLENGE_TIMEOUT, Failure, Webhooks};
use crate::error::ApiError;
use std::time::Instant;
use switchboard_proto::{
    CallbackChallenge, CallbackId, ChallengeResponse, ErrorCode, RegisterCallback,
};
use switchboard_webhook::Secret;
use url::Url;

/// The most of an endpoint's answer the server reads.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A registration that passed the checks of its body.
pub struct Checked {
    pub url: Url,
    pub secret: Secret,
}

/// The secret's form (400), the URL's form and every address its host resolves to
/// now (422 `webhook_target_forbidden`).
pub async fn check(w: &Webhooks, body: &RegisterCallback) -> Result<Checked, ApiError> {
    let secret = Secret::parse(&body.secret).map_err(|e| {
        ApiError::validation(format!(
            "secret: {e}; make one with `switchboard agent callback secret` or \
             `\"whsec_\" + base64(32 random bytes)`"
        ))
    })?;
    if body.url.len() > 2_048 {
        return Err(ApiError::validation(
            "url: at most 2048 characters; use a shorter URL",
        ));
    }
    let forbidden =
        |f: super::target::Forbidden| ApiError::new(ErrorCode::WebhookTargetForbidden, f.0);
    let url = super::target::check_url(&body.url, w.policy).map_err(forbidden)?;
    super::target::resolve_checked(&url, w.lookup.as_ref(), w.policy)
        .await
        .map_err(forbidden)?;
    Ok(Checked { url, secret })
}

/// What one challenge got.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Option<u16>,
    /// Why it failed; `None`: the endpoint answered right.
    pub error: Option<String>,
    pub latency_ms: u64,
}

/// POSTs the challenge to `url`, signed as a delivery of callback `id`, and checks
/// the answer: 2xx within 10 s with the right `challenge_response`.
pub async fn challenge(
    w: &Webhooks,
    id: CallbackId,
    url: &Url,
    secret: &Secret,
    now_secs: i64,
) -> Outcome {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let body = serde_json::to_vec(&CallbackChallenge {
        kind: "callback.challenge".to_owned(),
        challenge: token.clone(),
    })
    .unwrap_or_default();
    let started = Instant::now();
    let webhook_id = format!("challenge_{}", uuid::Uuid::now_v7());
    let keyid = id.to_string();
    let post = super::Post {
        url,
        secret,
        keyid: &keyid,
        webhook_id: &webhook_id,
        now_secs,
        timeout: CHALLENGE_TIMEOUT,
    };
    let sent = w.post(&post, body).await;
    let (status, read) = match sent {
        Ok(response) => {
            let status = response.status();
            (status, read_limited(response).await)
        }
        Err(failure) => {
            return Outcome {
                status: None,
                error: Some(match failure {
                    Failure::Timeout(_) => format!(
                        "the endpoint did not answer the challenge within {} s",
                        CHALLENGE_TIMEOUT.as_secs()
                    ),
                    other => other.to_string(),
                }),
                latency_ms: started.elapsed().as_millis() as u64,
            };
        }
    };
    let latency_ms = started.elapsed().as_millis() as u64;
    let error = if !status.is_success() {
        Some(format!(
            "the endpoint answered the challenge with HTTP {}; it must answer 2xx with \
             {{\"challenge_response\": base64(HMAC-SHA256(secret, challenge))}}",
            status.as_u16()
        ))
    } else {
        match read {
            Err(e) => Some(e),
            Ok(bytes) => match serde_json::from_slice::<ChallengeResponse>(&bytes) {
                Err(_) => Some(
                    "the endpoint's answer is not {\"challenge_response\": \"…\"} JSON".to_owned(),
                ),
                Ok(answer) => {
                    if switchboard_webhook::verify_challenge_response(
                        secret,
                        &token,
                        &answer.challenge_response,
                    ) {
                        None
                    } else {
                        Some(
                            "the endpoint's challenge_response is wrong: it must be the \
                             base64 HMAC-SHA256 of the challenge, keyed with the secret's \
                             decoded bytes"
                                .to_owned(),
                        )
                    }
                }
            },
        }
    };
    Outcome {
        status: Some(status.as_u16()),
        error,
        latency_ms,
    }
}

/// The answer's body, at most [`MAX_ANSWER_BYTES`].
pub async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(format!(
                        "the endpoint's answer is longer than {} KiB",
                        MAX_ANSWER_BYTES / 1024
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) if e.is_timeout() => {
                return Err("the endpoint's answer did not arrive in time".to_owned());
            }
            Err(_) => return Err("the endpoint's answer was cut off".to_owned()),
        }
    }
}
