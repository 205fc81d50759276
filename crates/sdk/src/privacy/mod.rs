//! The privacy gate: what an agent may send, checked before a payload is serialized
//! or written to the outbox.
//!
//! Terms:
//! - a [`Schema`] is the **default-deny allowlist** of one message type: members it
//!   does not list are *stripped* (reported by path, never by value); a listed
//!   member of the wrong JSON type *refuses* the payload;
//! - a **scanner** looks at every string that remains, recursively, for
//!   credentials ([`Credential`]) and personal data ([`PiiKind`]);
//! - a [`Finding`] names the [`Rule`], the JSON path and the byte range, never the
//!   matched text;
//! - the **policy**: any credential refuses; PII refuses unless the schema allows
//!   that kind on that field ([`Schema::allow_pii`]); an unknown message type
//!   refuses.
//!
//! ```
//! use serde_json::json;
//! use switchboard_sdk::privacy::{FieldKind, Gate, Schema};
//!
//! let gate = Gate::new().schema(
//!     Schema::new("task")
//!         .field("title", FieldKind::Text)
//!         .field("priority", FieldKind::Integer),
//! );
//! let cleared = gate
//!     .check("task", json!({"title": "index the repo", "priority": 2, "debug": true}))
//!     .expect("nothing secret here");
//! assert_eq!(cleared.stripped, ["$.debug"]);
//!
//! let blocked = gate
//!     .check("task", json!({"title": "use AKIAIOSFODNN7EXAMPLE"}))
//!     .unwrap_err();
//! assert!(!blocked.to_string().contains("AKIA"));
//! ```
//!
//! Scanners and thresholds are documented in their files: `credentials.rs` (known
//! shapes, secret URLs, secret-named keys; the families and their order),
//! `entropy.rs` (32+ characters at 4.3 bits per character or more; see
//! [`EntropyRule`]) and `pii.rs` (SSN ranges, Luhn-valid cards, e-mail, IBANs,
//! phone numbers, national ids). [`Config`] tunes them; the default is the safe
//! setting. `tests/privacy_corpus` measures recall and false positives.

mod config;
mod credentials;
mod entropy;
mod finding;
mod pii;
mod scan;
mod schema;
mod walk;

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

pub use config::DEFAULT_SCHEMAS;
pub use entropy::{EntropyRule, shannon_entropy};
pub use finding::{Credential, Finding, PiiKind, Rule};
pub use schema::{FieldKind, Schema};

/// Scanner settings. The default scans for everything, e-mail included.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// The generic high-entropy scanner; `None` turns it off (prefix scanners stay).
    pub entropy: Option<EntropyRule>,
    /// Whether e-mail addresses count as PII.
    pub scan_emails: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            entropy: Some(EntropyRule::default()),
            scan_emails: true,
        }
    }
}

/// The gate: one [`Schema`] per message type and the scanner [`Config`].
#[derive(Debug, Clone, Default)]
pub struct Gate {
    schemas: HashMap<String, Schema>,
    config: Config,
}

impl Gate {
    /// A gate with no schemas (every message type refused) and the default config.
    pub fn new() -> Self {
        Self::default()
    }

    /// A gate with no schemas and `config`.
    pub fn with_config(config: Config) -> Self {
        Self {
            schemas: HashMap::new(),
            config,
        }
    }

    /// Registers `schema` under its message type (builder form of [`Gate::register`]).
    pub fn schema(mut self, schema: Schema) -> Self {
        self.register(schema);
        self
    }

    /// Registers `schema` under its message type, replacing any previous one.
    pub fn register(&mut self, schema: Schema) {
        self.schemas
            .insert(schema.message_type().to_owned(), schema);
    }

    /// The scanner settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Checks `payload` as a `message_type`: strips what the schema does not allow,
    /// then refuses on an unknown type, a wrong type, any credential or any PII the
    /// schema does not allow. Every refusal is collected, not just the first.
    pub fn check(&self, message_type: &str, payload: Value) -> Result<Cleared, Blocked> {
        let blocked = |refusals| Blocked {
            message_type: message_type.to_owned(),
            refusals,
        };
        let Some(schema) = self.schemas.get(message_type) else {
            return Err(blocked(vec![Refusal::UnknownMessageType]));
        };
        let Value::Object(map) = payload else {
            let found = walk::json_type(&payload);
            return Err(blocked(vec![Refusal::NotAnObject { found }]));
        };
        let mut walk = walk::Walk::new(&self.config);
        let cleaned = walk.object(schema, map, "$", &[]);
        if walk.refusals.is_empty() {
            Ok(Cleared {
                payload: Value::Object(cleaned),
                stripped: walk.stripped,
                allowed_pii: walk.allowed,
            })
        } else {
            Err(blocked(walk.refusals))
        }
    }
}

/// A payload the gate let through.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleared {
    /// The payload with every member the schema does not allow removed.
    pub payload: Value,
    /// JSON paths of the removed members (never their values).
    pub stripped: Vec<String>,
    /// PII found where the schema allows it, for the record.
    pub allowed_pii: Vec<Finding>,
}

/// Why the gate refused a payload. Its `Debug` and `Display` hold rules, paths,
/// byte ranges and type names only, never payload text (I11).
#[derive(Debug, Clone, PartialEq)]
pub struct Blocked {
    /// The message type the payload was checked as.
    pub message_type: String,
    /// Every reason, in payload order; never empty.
    pub refusals: Vec<Refusal>,
}

impl Blocked {
    /// The findings among the refusals.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.refusals.iter().filter_map(|r| match r {
            Refusal::Finding(f) => Some(f),
            _ => None,
        })
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "privacy gate refused a {:?} payload: ",
            self.message_type
        )?;
        for (i, refusal) in self.refusals.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{refusal}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Blocked {}

/// One reason for a refusal.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Refusal {
    /// No schema is registered for the message type (default deny).
    UnknownMessageType,
    /// The payload is not a JSON object.
    NotAnObject {
        /// Its JSON type.
        found: &'static str,
    },
    /// An allowed member holds the wrong JSON type.
    WrongType {
        /// Where.
        path: String,
        /// The kind the schema asks for.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A scanner matched a credential, or PII the schema does not allow there.
    Finding(Finding),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownMessageType => f.write_str(
                "no schema is registered for this message type; register one with \
                 Gate::register (unknown types are refused)",
            ),
            Self::NotAnObject { found } => {
                write!(f, "the payload is {found}; send a JSON object")
            }
            Self::WrongType {
                path,
                expected,
                found,
            } => write!(f, "{path} must be {expected}, found {found}"),
            Self::Finding(finding) => match finding.rule {
                Rule::Credential(_) => {
                    write!(f, "{finding}: remove the credential from the payload")
                }
                Rule::Pii(_) => write!(
                    f,
                    "{finding}: remove it, or allow this kind on this field with \
                     Schema::allow_pii"
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests;
