//! The signature base (RFC 9421 §2.5) and what goes into it: the serialized
//! signature parameters (§2.3), the component values of a request (§2.1, §2.2),
//! and the structured fields a verifier parses. Shared by every algorithm.

use http::HeaderMap;
use sfv::{Dictionary, Parser, Version};

use crate::VerifyError;

/// Signature parameters (RFC 9421 §2.3) to serialize for a new signature.
///
/// [`SignatureParams::serialize`] writes the inner list and then the parameters
/// that are set, in the order `created`, `expires`, `nonce`, `keyid`, `alg`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignatureParams<'a> {
    /// Component identifiers, without quotes (`"@method"`, `"content-type"`).
    pub components: &'a [&'a str],
    /// `created`, Unix seconds.
    pub created: Option<i64>,
    /// `expires`, Unix seconds.
    pub expires: Option<i64>,
    /// `nonce`.
    pub nonce: Option<&'a str>,
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
    /// be printable ASCII, which only [`crate::try_sign`] checks (for webhooks).
    pub fn serialize(&self) -> String {
        let components: Vec<String> = self.components.iter().map(|c| sf_string(c)).collect();
        let mut out = format!("({})", components.join(" "));
        if let Some(created) = self.created {
            out.push_str(&format!(";created={created}"));
        }
        if let Some(expires) = self.expires {
            out.push_str(&format!(";expires={expires}"));
        }
        if let Some(nonce) = self.nonce {
            out.push_str(&format!(";nonce={}", sf_string(nonce)));
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
pub(crate) fn sf_string(value: &str) -> String {
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
        self.message().component_value(component)
    }

    /// The same request for the shared code: the query is unknown here (the
    /// webhook receiver passes the path alone), so `@query` is unsupported.
    pub(crate) fn message(&self) -> Message<'_> {
        Message {
            method: self.method,
            authority: self.authority,
            path: self.path,
            query: Query::Unknown,
            headers: self.headers,
        }
    }
}

/// What the verifier knows of a request's query (RFC 9421 §2.2.7).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Query<'a> {
    /// Not given (the webhook receiver's [`RequestView`]): `@query` is refused.
    Unknown,
    /// The request target has no `?`: `@query` is `?`.
    Absent,
    /// What follows the `?`, possibly empty: `@query` is `?` and this.
    Present(&'a str),
}

/// A request as the shared signing and verifying code reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Message<'a> {
    pub(crate) method: &'a str,
    pub(crate) authority: &'a str,
    /// The path; a query, if present, is dropped (`@query` comes from `query`).
    pub(crate) path: &'a str,
    pub(crate) query: Query<'a>,
    pub(crate) headers: &'a HeaderMap,
}

impl Message<'_> {
    /// The canonical value of one covered component: `@method`, `@authority`,
    /// `@path`, `@query` (when the query is known) or a lowercase header field.
    /// See [`RequestView::component_value`].
    pub(crate) fn component_value(&self, component: &str) -> Result<String, VerifyError> {
        let value = match (component, self.query) {
            ("@method", _) => self.method.to_owned(),
            ("@authority", _) => normalize_authority(self.authority),
            ("@path", _) => normalize_path(self.path).to_owned(),
            ("@query", Query::Absent) => "?".to_owned(),
            ("@query", Query::Present(query)) => format!("?{query}"),
            (name, _) if name.starts_with('@') => {
                return Err(VerifyError::UnsupportedComponent(sf_string(name)));
            }
            (name, _) => {
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
pub(crate) fn combined_field(
    headers: &HeaderMap,
    name: &str,
) -> Result<Option<String>, VerifyError> {
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
pub(crate) fn dictionary_field(headers: &HeaderMap, name: &str) -> Result<Dictionary, VerifyError> {
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
