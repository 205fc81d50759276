//! Schemas from a JSON document, for configuration files (`switchboard agent`
//! reads `$XDG_CONFIG_HOME/switchboard/schemas.json`).
//!
//! ```json
//! {
//!   "task": {
//!     "fields": {
//!       "title": "text",
//!       "priority": "integer",
//!       "tags": ["text"],
//!       "meta": { "fields": { "done": "boolean" } }
//!     },
//!     "allow_pii": { "reporter": ["email"] }
//!   }
//! }
//! ```
//!
//! A kind is `"text"`, `"integer"`, `"number"`, `"boolean"`, `[kind]` (a list) or
//! `{"fields": …, "allow_pii": …}` (a nested object). PII kinds are `ssn`,
//! `payment_card`, `email`, `iban`, `phone` and `national_id`. Unknown keys are errors, so a typo never silently
//! allows or strips a field.

use serde_json::{Map, Value};

use super::{FieldKind, Gate, PiiKind, Schema};

/// The schemas of the built-in default: one type, `message`, with a `text`, a
/// `subject`, `tags` and a `priority`. Everything else is stripped.
pub const DEFAULT_SCHEMAS: &str = r#"{
  "message": {
    "fields": {
      "text": "text",
      "subject": "text",
      "tags": ["text"],
      "priority": "integer"
    }
  }
}"#;

impl Gate {
    /// Adds every schema of a JSON document (see the module docs). The error says
    /// where the document is wrong.
    pub fn load_schemas(mut self, json: &str) -> Result<Self, String> {
        let document: Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(types) = document else {
            return Err("the top level must be an object of message types".into());
        };
        for (message_type, spec) in types {
            let schema = schema(Schema::new(message_type.clone()), &spec, &message_type)?;
            self.register(schema);
        }
        Ok(self)
    }
}

fn schema(mut schema: Schema, spec: &Value, at: &str) -> Result<Schema, String> {
    let Value::Object(spec) = spec else {
        return Err(format!("{at}: expected an object with \"fields\""));
    };
    for key in spec.keys() {
        if key != "fields" && key != "allow_pii" {
            return Err(format!(
                "{at}: unknown key {key:?} (use \"fields\" and \"allow_pii\")"
            ));
        }
    }
    let empty = Map::new();
    let fields = match spec.get("fields") {
        Some(Value::Object(fields)) => fields,
        None => &empty,
        Some(_) => return Err(format!("{at}.fields: expected an object")),
    };
    for (name, kind) in fields {
        schema = schema.field(name.clone(), field_kind(kind, &format!("{at}.{name}"))?);
    }
    match spec.get("allow_pii") {
        None => {}
        Some(Value::Object(allow)) => {
            for (name, kinds) in allow {
                let Value::Array(kinds) = kinds else {
                    return Err(format!(
                        "{at}.allow_pii.{name}: expected a list of PII kinds"
                    ));
                };
                for kind in kinds {
                    let kind = match kind.as_str() {
                        Some("ssn") => PiiKind::Ssn,
                        Some("payment_card") => PiiKind::PaymentCard,
                        Some("email") => PiiKind::Email,
                        Some("iban") => PiiKind::Iban,
                        Some("phone") => PiiKind::Phone,
                        Some("national_id") => PiiKind::NationalId,
                        _ => {
                            return Err(format!(
                                "{at}.allow_pii.{name}: {kind} is not ssn, payment_card, email, iban, \
                                 phone or national_id"
                            ));
                        }
                    };
                    schema = schema.allow_pii(name.clone(), kind);
                }
            }
        }
        Some(_) => return Err(format!("{at}.allow_pii: expected an object")),
    }
    Ok(schema)
}

fn field_kind(kind: &Value, at: &str) -> Result<FieldKind, String> {
    match kind {
        Value::String(name) => match name.as_str() {
            "text" => Ok(FieldKind::Text),
            "integer" => Ok(FieldKind::Integer),
            "number" => Ok(FieldKind::Number),
            "boolean" => Ok(FieldKind::Boolean),
            other => Err(format!(
                "{at}: {other:?} is not a kind (text, integer, number, boolean, [kind] or an object)"
            )),
        },
        Value::Array(items) if items.len() == 1 => {
            Ok(FieldKind::list(field_kind(&items[0], &format!("{at}[]"))?))
        }
        Value::Array(_) => Err(format!("{at}: a list kind holds exactly one item kind")),
        Value::Object(_) => Ok(FieldKind::Object(schema(Schema::nested(), kind, at)?)),
        _ => Err(format!("{at}: expected a kind")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_document_builds_the_same_gate_as_the_builder() {
        let loaded = Gate::new()
            .load_schemas(
                r#"{"task": {"fields": {"title": "text", "n": "integer", "tags": ["text"],
                    "meta": {"fields": {"done": "boolean"}}, "reporter": "text"},
                    "allow_pii": {"reporter": ["email"]}}}"#,
            )
            .unwrap();
        let built = Gate::new().schema(
            Schema::new("task")
                .field("title", FieldKind::Text)
                .field("n", FieldKind::Integer)
                .field("tags", FieldKind::list(FieldKind::Text))
                .object("meta", Schema::nested().field("done", FieldKind::Boolean))
                .field("reporter", FieldKind::Text)
                .allow_pii("reporter", PiiKind::Email),
        );
        let payload = json!({"title": "t", "n": 1, "tags": ["a"], "meta": {"done": true, "x": 1},
            "reporter": "ann@example.com", "extra": 2});
        assert_eq!(
            loaded.check("task", payload.clone()).unwrap(),
            built.check("task", payload).unwrap()
        );
    }

    #[test]
    fn mistakes_are_named_with_their_path() {
        for (document, expected) in [
            ("[]", "top level"),
            (r#"{"t": {"field": {}}}"#, "t: unknown key \"field\""),
            (
                r#"{"t": {"fields": {"a": "txt"}}}"#,
                "t.a: \"txt\" is not a kind",
            ),
            (
                r#"{"t": {"fields": {"a": ["text", "integer"]}}}"#,
                "t.a: a list kind",
            ),
            (r#"{"t": {"allow_pii": {"a": ["fax"]}}}"#, "t.allow_pii.a"),
            ("{", "not JSON"),
        ] {
            let error = Gate::new().load_schemas(document).unwrap_err();
            assert!(error.contains(expected), "{document}: {error}");
        }
    }

    #[test]
    fn the_default_allows_plain_messages_only() {
        let gate = Gate::new().load_schemas(DEFAULT_SCHEMAS).unwrap();
        let cleared = gate
            .check(
                "message",
                json!({"text": "build is green", "env": {"HOME": "/root"}}),
            )
            .unwrap();
        assert_eq!(cleared.stripped, ["$.env"]);
        assert!(gate.check("other", json!({})).is_err());
    }
}
