//! RFC 9421 HTTP Message Signatures with `hmac-sha256`, as Switchboard uses them.
//!
//! # Why this is written here instead of using the `httpsig` crate
//!
//! `httpsig` 0.0.26 was evaluated (it builds on stable and has hmac-sha256 and a
//! custom component list) and rejected because:
//!
//! 1. It cannot produce or check our exact `Signature-Input`. `HttpSignatureParams`
//!    keeps only known fields and re-serializes them in a fixed order
//!    (`created;expires;nonce;alg;keyid;tag`), both when signing and when it
//!    rebuilds the `@signature-params` line to verify. Our contract puts `keyid`
//!    before `alg`, and RFC 9421 §2.3 signs the parameters as the sender serialized
//!    them: parsing `…;keyid="cb_1";alg="hmac-sha256"` and printing it back gave
//!    `…;alg="hmac-sha256";keyid="cb_1"`, so its verifier would refuse our (valid)
//!    signatures and anyone else's that order parameters differently or add one.
//! 2. Its expiry check reads the system clock inside
//!    `verify_signature_headers` and it never checks `created`; the receiver API
//!    here takes `now` so that tests need no clock.
//! 3. It pulls a second RustCrypto generation (hmac 0.13, sha2 0.11, rand 0.10)
//!    next to the workspace's sha2 0.10, plus ECDSA P-256/P-384, Ed25519, PKCS#8,
//!    SPKI and SEC1 with no feature to leave them out: 78 crates with its default
//!    features off, against about 40 for this whole crate.
//! 4. Its core API still takes component lines as `"name": value` strings, so the
//!    value extraction would be ours anyway, and the 0.0.x series changes API
//!    between releases.
//!
//! What is left is small: the signature base (§2.5) over a caller-given component
//! list, the few derived components we use (§2.2), header canonicalization
//! (§2.1), and `sfv` for parsing the structured fields (and re-serializing the
//! received signature parameters, which is what RFC 9421 signs).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use sfv::{BareItem, Dictionary, FieldType as _, InnerList, ListEntry, Parser, Version};

use crate::digest::verify_content_digest;
use crate::standard::parse_timestamp;
use crate::{
    CONTENT_DIGEST, SIGNATURE, SIGNATURE_INPUT, Secret, TIMESTAMP_TOLERANCE_SECS, Verified,
    VerifyError, WEBHOOK_ID, WEBHOOK_TIMESTAMP,
};

/// The label of Switchboard's signature in `Signature-Input` and `Signature`.
pub const SIGNATURE_LABEL: &str = "sig1";
/// The `alg` parameter.
pub const ALGORITHM: &str = "hmac-sha256";
/// What the server's signature covers, in this order. A verified signature must
/// cover at least these.
pub const COVERED_COMPONENTS: [&str; 6] = [
    "@method",
    "@authority",
    "@path",
    CONTENT_DIGEST,
    WEBHOOK_ID,
    WEBHOOK_TIMESTAMP,
];
/// `expires - created` of the server's signatures unless told otherwise.
pub const DEFAULT_VALIDITY_SECS: i64 = 300;

/// Signature parameters (RFC 9421 §2.3) to serialize for a new signature.
///
/// [`SignatureParams::serialize`] writes the inner list and then the parameters
/// that are set, in the order `created`, `expires`, `keyid`, `alg`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignatureParams<'a> {
    /// Component identifiers, without quotes (`"@method"`, `"content-type"`).
    pub components: &'a [&'a str],
    /// `created`, Unix seconds.
    pub created: Option<i64>,
    /// `expires`, Unix seconds.
    pub expires: Option<i64>,
    /// `keyid`.
    pub keyid: Option<&'a str>,
    /// `alg`.
    pub alg: Option<&'a str>,
}

impl SignatureParams<'_> {
    /// The `@signature-params` value, which is also the `Signature-Input` member's
    /// value, e.g. `("@method" "@path");created=1;keyid="k"`.
    ///
    /// Strings are written as RFC 8941 sf-strings (`\` and `"` escaped). They must
    /// be printable ASCII, which only [`crate::try_sign`] checks.
    pub fn serialize(&self) -> String {
        let components: Vec<String> = self.components.iter().map(|c| sf_string(c)).collect();
        let mut out = format!("({})", components.join(" "));
        if let Some(created) = self.created {
            out.push_str(&format!(";created={created}"));
        }
        if let Some(expires) = self.expires {
            out.push_str(&format!(";expires={expires}"));
        }
        if let Some(keyid) = self.keyid {
            out.push_str(&format!(";keyid={}", sf_string(keyid)));
        }
        if let Some(alg) = self.alg {
            out.push_str(&format!(";alg={}", sf_string(alg)));
        }
        out
    }
}

/// An RFC 8941 sf-string: quoted, with `\` and `"` escaped.
fn sf_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The signature base (RFC 9421 §2.5): one `"<component>": <value>` line per
/// covered component, in order, then `"@signature-params": <signature_params>`,
/// joined by LF with no trailing LF.
///
/// `components` pairs each identifier (e.g. `@authority`, `content-type`; plain
/// names, no component parameters) with its canonical value, as returned by
/// [`RequestView::component_value`]. `signature_params` is the serialized inner
/// list with its parameters ([`SignatureParams::serialize`] when signing, the
/// received value when verifying).
pub fn signature_base(components: &[(&str, &str)], signature_params: &str) -> String {
    let mut base = String::new();
    for (name, value) in components {
        base.push_str(&sf_string(name));
        base.push_str(": ");
        base.push_str(value);
        base.push('\n');
    }
    base.push_str("\"@signature-params\": ");
    base.push_str(signature_params);
    base
}

/// The `hmac-sha256` signature of a signature base, base64 (standard, padded):
/// what goes between the colons of a `Signature` member.
pub fn sign_signature_base(secret: &Secret, base: &str) -> String {
    STANDARD.encode(secret.sign_bytes(base.as_bytes()))
}

/// `@authority` (RFC 9421 §2.2.3): the host is case-insensitive, so lowercase it.
///
/// The other normalization, dropping the scheme's default port, is the sender's:
/// give `host[:port]` the way the `url` crate prints a URL (it already omits a
/// default port), and a receiver passes its `Host` as received.
pub fn normalize_authority(authority: &str) -> String {
    authority.to_ascii_lowercase()
}

/// `@path` (RFC 9421 §2.2.6): the path without the query, `/` when empty, with
/// percent-encoding left as it is.
pub fn normalize_path(path: &str) -> &str {
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if path.is_empty() { "/" } else { path }
}

/// The parts of a received request that RFC 9421 components are taken from.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// The method, as received (methods are case-sensitive).
    pub method: &'a str,
    /// `host[:port]`, from `Host` (HTTP/1.1) or `:authority` (HTTP/2).
    pub authority: &'a str,
    /// The request target's path (a query, if present, is dropped).
    pub path: &'a str,
    /// All header fields.
    pub headers: &'a HeaderMap,
}

impl RequestView<'_> {
    /// The canonical value of one covered component.
    ///
    /// Supports `@method`, `@authority` and `@path`, and any header field named
    /// in lowercase: its field lines, each stripped of leading and trailing
    /// spaces and tabs, joined by `, ` (§2.1). Other derived components and
    /// component parameters (`;sf`, `;key`, `;bs`, `;req`, `;tr`) are refused.
    pub fn component_value(&self, component: &str) -> Result<String, VerifyError> {
        let value = match component {
            "@method" => self.method.to_owned(),
            "@authority" => normalize_authority(self.authority),
            "@path" => normalize_path(self.path).to_owned(),
            name if name.starts_with('@') => {
                return Err(VerifyError::UnsupportedComponent(sf_string(name)));
            }
            name => {
                if name.is_empty() || !name.bytes().all(|b| is_tchar(b) && !b.is_ascii_uppercase())
                {
                    return Err(VerifyError::UnsupportedComponent(sf_string(name)));
                }
                return combined_field(self.headers, name)?
                    .ok_or_else(|| VerifyError::MissingHeader(name.to_owned()));
            }
        };
        // Derived values come from the caller, not from `http` types that rule out
        // control characters: refuse anything that could forge a base line.
        if value.is_empty() || value.bytes().any(|b| b.is_ascii_control()) {
            return Err(VerifyError::InvalidComponentValue(component.to_owned()));
        }
        Ok(value)
    }
}

/// An HTTP `tchar` (RFC 9110 §5.6.2): what a field name is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// All lines of a field, trimmed and joined by `, `; `None` if it is absent.
fn combined_field(headers: &HeaderMap, name: &str) -> Result<Option<String>, VerifyError> {
    let mut lines = Vec::new();
    for value in headers.get_all(name) {
        let value = value.to_str().map_err(|_| VerifyError::InvalidHeader {
            header: name.to_owned(),
            reason: "not visible ASCII".to_owned(),
        })?;
        lines.push(value.trim_matches([' ', '\t']));
    }
    Ok((!lines.is_empty()).then(|| lines.join(", ")))
}

/// Parses a Dictionary-valued signature field (all its lines combined).
fn dictionary_field(headers: &HeaderMap, name: &str) -> Result<Dictionary, VerifyError> {
    let text = combined_field(headers, name)?
        .ok_or_else(|| VerifyError::MissingHeader(name.to_owned()))?;
    Parser::new(&text)
        .with_version(Version::Rfc8941)
        .parse()
        .map_err(|error| VerifyError::InvalidHeader {
            header: name.to_owned(),
            reason: format!("not a structured-field dictionary ({error})"),
        })
}

/// The server side: `(Signature-Input, Signature)` values for one request.
pub(crate) fn sign_rfc9421(
    secret: &Secret,
    request: &crate::Outgoing<'_>,
    content_digest: &str,
    expires: i64,
) -> (String, String) {
    let authority = normalize_authority(request.authority);
    let timestamp = request.timestamp.to_string();
    let values = [
        request.method,
        authority.as_str(),
        normalize_path(request.path),
        content_digest,
        request.webhook_id,
        timestamp.as_str(),
    ];
    let lines: Vec<(&str, &str)> = COVERED_COMPONENTS.iter().copied().zip(values).collect();
    let params = SignatureParams {
        components: &COVERED_COMPONENTS,
        created: Some(request.timestamp),
        expires: Some(expires),
        keyid: Some(request.keyid),
        alg: Some(ALGORITHM),
    }
    .serialize();
    let signature = sign_signature_base(secret, &signature_base(&lines, &params));
    (
        format!("{SIGNATURE_LABEL}={params}"),
        format!("{SIGNATURE_LABEL}=:{signature}:"),
    )
}

/// Verifies the RFC 9421 signature alone (with its `Content-Digest`).
///
/// Looks for the signatures in `Signature-Input` whose `keyid` is `expected_keyid`
/// (`sig1` first) and accepts the request if one of them passes every check:
/// `alg`, if present, is `hmac-sha256`; `created` and `expires` are present,
/// `created` is at most 300 s after `now` and `expires` is not before `now`; the
/// covered components include [`COVERED_COMPONENTS`], with no duplicates and none
/// this verifier cannot compute; the HMAC over the rebuilt signature base matches
/// (constant-time); and the covered `Content-Digest` matches `body`. If none
/// passes, the error is the first candidate's.
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors `verify`, whose signature is the contract the server and SDK use"
)]
pub fn verify_rfc9421(
    secret: &Secret,
    expected_keyid: &str,
    method: &str,
    authority: &str,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let inputs = dictionary_field(headers, SIGNATURE_INPUT)?;
    let signatures = dictionary_field(headers, SIGNATURE)?;
    let request = RequestView {
        method,
        authority,
        path,
        headers,
    };

    let mut found = Vec::new();
    let mut candidates = Vec::new();
    for (label, entry) in &inputs {
        let ListEntry::InnerList(input) = entry else {
            continue;
        };
        match input.params.get("keyid").and_then(BareItem::as_string) {
            Some(keyid) if keyid.as_str() == expected_keyid => {
                candidates.push((label.as_str(), input))
            }
            Some(keyid) => found.push(keyid.as_str().to_owned()),
            None => {}
        }
    }
    candidates.sort_by_key(|(label, _)| *label != SIGNATURE_LABEL);

    let mut first_error = None;
    for (label, input) in candidates {
        match verify_one(secret, &request, label, input, &signatures, body, now) {
            Ok(verified) => return Ok(verified),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| VerifyError::KeyidMismatch {
        expected: expected_keyid.to_owned(),
        found,
    }))
}

fn verify_one(
    secret: &Secret,
    request: &RequestView<'_>,
    label: &str,
    input: &InnerList,
    signatures: &Dictionary,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let tag = match signatures.get(label) {
        None => return Err(VerifyError::MissingSignatureLabel(label.to_owned())),
        Some(ListEntry::Item(item)) => item.bare_item.as_byte_sequence(),
        Some(ListEntry::InnerList(_)) => None,
    }
    .ok_or_else(|| VerifyError::InvalidHeader {
        header: SIGNATURE.to_owned(),
        reason: format!("its `{label}` member is not a byte sequence"),
    })?;

    // Parameters.
    if let Some(alg) = input.params.get("alg")
        && alg.as_string().map(|alg| alg.as_str()) != Some(ALGORITHM)
    {
        return Err(VerifyError::UnsupportedAlgorithm {
            label: label.to_owned(),
            alg: sfv::Item::new(alg.clone()).serialize(),
        });
    }
    let integer_param = |param: &'static str| -> Result<i64, VerifyError> {
        let value = input
            .params
            .get(param)
            .ok_or_else(|| VerifyError::MissingParameter {
                label: label.to_owned(),
                param,
            })?;
        value
            .as_integer()
            .map(i64::from)
            .ok_or_else(|| VerifyError::InvalidParameter {
                label: label.to_owned(),
                param,
                expected: "an integer",
            })
    };
    let created = integer_param("created")?;
    let expires = integer_param("expires")?;
    if created.saturating_sub(now) > TIMESTAMP_TOLERANCE_SECS {
        return Err(VerifyError::CreatedInFuture {
            label: label.to_owned(),
            created,
            now,
        });
    }
    if expires < now {
        return Err(VerifyError::Expired {
            label: label.to_owned(),
            expires,
            now,
        });
    }

    // Covered components.
    let mut names: Vec<&str> = Vec::with_capacity(input.items.len());
    for item in &input.items {
        let name = match (&item.bare_item, item.params.is_empty()) {
            (BareItem::String(name), true) => name.as_str(),
            _ => return Err(VerifyError::UnsupportedComponent(item.serialize())),
        };
        if names.contains(&name) {
            return Err(VerifyError::DuplicateComponent(sf_string(name)));
        }
        names.push(name);
    }
    if let Some(missing) = COVERED_COMPONENTS.iter().find(|c| !names.contains(c)) {
        return Err(VerifyError::MissingCoveredComponent {
            label: label.to_owned(),
            component: missing,
        });
    }
    let values = names
        .iter()
        .map(|name| request.component_value(name))
        .collect::<Result<Vec<String>, VerifyError>>()?;
    let lines: Vec<(&str, &str)> = names
        .iter()
        .copied()
        .zip(values.iter().map(String::as_str))
        .collect();

    // The parameters as RFC 8941 serializes what was received (their order kept).
    let params = vec![ListEntry::InnerList(input.clone())]
        .serialize()
        .ok_or_else(|| VerifyError::InvalidHeader {
            header: SIGNATURE_INPUT.to_owned(),
            reason: format!("its `{label}` member cannot be serialized"),
        })?;
    if !secret.verify_bytes(signature_base(&lines, &params).as_bytes(), tag) {
        return Err(VerifyError::SignatureMismatch(label.to_owned()));
    }

    // Authenticated from here on.
    let value_of = |name: &str| {
        lines
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, value)| *value)
    };
    verify_content_digest(value_of(CONTENT_DIGEST), body)?;
    Ok(Verified {
        webhook_id: value_of(WEBHOOK_ID).to_owned(),
        timestamp: parse_timestamp(value_of(WEBHOOK_TIMESTAMP))?,
    })
}
