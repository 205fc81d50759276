//! The default-deny allowlist: which fields a message type may carry, and of what
//! kind.
//!
//! A [`Schema`] lists the fields of one JSON object. Fields it does not list are
//! stripped; a listed field holding the wrong JSON type refuses the whole payload.
//! Every field is optional, and `null` is accepted for any field (it carries no
//! data). PII is refused everywhere unless [`Schema::allow_pii`] allows one kind on
//! one field (and everything under it).

use std::collections::BTreeMap;

use super::finding::PiiKind;

/// The JSON type a field must hold.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FieldKind {
    /// A string; scanned for credentials and PII.
    Text,
    /// A whole number (`1`, `-7`; not `1.5`).
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A nested object with its own allowlist.
    Object(Schema),
    /// An array whose every item is of this kind.
    List(Box<FieldKind>),
}

impl FieldKind {
    /// An array of `item`s: `FieldKind::list(FieldKind::Text)`.
    pub fn list(item: FieldKind) -> Self {
        Self::List(Box::new(item))
    }

    /// The name printed in a wrong-type refusal.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Object(_) => "object",
            Self::List(_) => "array",
        }
    }
}

/// The allowlist of one object: for the top level of a message type, or for a
/// nested object field.
///
/// ```
/// use switchboard_sdk::privacy::{FieldKind, PiiKind, Schema};
///
/// let task = Schema::new("task")
///     .field("title", FieldKind::Text)
///     .field("priority", FieldKind::Integer)
///     .field("tags", FieldKind::list(FieldKind::Text))
///     .field("reporter", FieldKind::Text)
///     .allow_pii("reporter", PiiKind::Email)
///     .object("meta", Schema::nested().field("done", FieldKind::Boolean));
/// assert_eq!(task.message_type(), "task");
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    message_type: String,
    fields: BTreeMap<String, FieldKind>,
    allowed_pii: BTreeMap<String, Vec<PiiKind>>,
}

impl Schema {
    /// An empty allowlist (every field stripped) for `message_type`.
    pub fn new(message_type: impl Into<String>) -> Self {
        Self {
            message_type: message_type.into(),
            ..Self::default()
        }
    }

    /// An empty allowlist for a nested object; it has no message type.
    pub fn nested() -> Self {
        Self::default()
    }

    /// Allows field `name` holding `kind`. Declaring a name again replaces it.
    pub fn field(mut self, name: impl Into<String>, kind: FieldKind) -> Self {
        self.fields.insert(name.into(), kind);
        self
    }

    /// Allows field `name` holding an object checked against `schema`.
    pub fn object(self, name: impl Into<String>, schema: Schema) -> Self {
        self.field(name, FieldKind::Object(schema))
    }

    /// Allows PII of `kind` in field `name` and everything under it. Credentials are
    /// never allowed. Call once per kind.
    pub fn allow_pii(mut self, name: impl Into<String>, kind: PiiKind) -> Self {
        let kinds = self.allowed_pii.entry(name.into()).or_default();
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
        self
    }

    /// The message type this schema is registered under (empty for nested ones).
    pub fn message_type(&self) -> &str {
        &self.message_type
    }

    /// The kind of field `name`, if it is allowed.
    pub fn kind_of(&self, name: &str) -> Option<&FieldKind> {
        self.fields.get(name)
    }

    /// The PII kinds allowed in field `name`.
    pub(super) fn pii_allowed_in(&self, name: &str) -> &[PiiKind] {
        self.allowed_pii.get(name).map_or(&[], Vec::as_slice)
    }
}
