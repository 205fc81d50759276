//! One pass over a payload against its [`Schema`]: strip what is not allowed, refuse
//! wrong types, and scan every string that remains.
//!
//! Paths are JSONPath-like: `$` is the payload, `.name` an object member (or
//! `["odd key"]` when the name is not a plain identifier), `[3]` an array item. A
//! stripped key that itself looks like a secret is printed as `[<redacted>]`.

use serde_json::{Map, Value};

use super::finding::{Finding, PiiKind, Rule};
use super::scan::scan;
use super::schema::{FieldKind, Schema};
use super::{Config, Refusal};

/// What the pass found, besides the cleaned payload.
#[derive(Debug)]
pub(super) struct Walk<'a> {
    config: &'a Config,
    /// Paths of the members removed because no schema allows them.
    pub(super) stripped: Vec<String>,
    /// PII findings that the schema allows where they are.
    pub(super) allowed: Vec<Finding>,
    /// Everything that refuses the payload.
    pub(super) refusals: Vec<Refusal>,
}

impl<'a> Walk<'a> {
    pub(super) fn new(config: &'a Config) -> Self {
        Self {
            config,
            stripped: Vec::new(),
            allowed: Vec::new(),
            refusals: Vec::new(),
        }
    }

    /// Cleans the members of `map` against `schema`.
    pub(super) fn object(
        &mut self,
        schema: &Schema,
        map: Map<String, Value>,
        path: &str,
        allow: &[PiiKind],
    ) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, value) in map {
            let Some(kind) = schema.kind_of(&key) else {
                let label = if scan(&key, self.config).is_empty() {
                    member(path, &key)
                } else {
                    format!("{path}[<redacted>]")
                };
                self.stripped.push(label);
                continue;
            };
            let child = member(path, &key);
            let mut child_allow = allow.to_vec();
            child_allow.extend_from_slice(schema.pii_allowed_in(&key));
            let value = self.value(kind, value, &child, &child_allow);
            out.insert(key, value);
        }
        out
    }

    fn value(&mut self, kind: &FieldKind, value: Value, path: &str, allow: &[PiiKind]) -> Value {
        match (kind, value) {
            (_, Value::Null) => Value::Null,
            (FieldKind::Text, Value::String(text)) => {
                self.text(&text, path, allow);
                Value::String(text)
            }
            (FieldKind::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n),
            (FieldKind::Number, Value::Number(n)) => Value::Number(n),
            (FieldKind::Boolean, Value::Bool(b)) => Value::Bool(b),
            (FieldKind::Object(schema), Value::Object(map)) => {
                Value::Object(self.object(schema, map, path, allow))
            }
            (FieldKind::List(item), Value::Array(items)) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| self.value(item, v, &format!("{path}[{i}]"), allow))
                    .collect(),
            ),
            (kind, other) => {
                self.refusals.push(Refusal::WrongType {
                    path: path.to_owned(),
                    expected: kind.name(),
                    found: json_type(&other),
                });
                Value::Null
            }
        }
    }

    fn text(&mut self, text: &str, path: &str, allow: &[PiiKind]) {
        for hit in scan(text, self.config) {
            let finding = Finding {
                rule: hit.rule,
                path: path.to_owned(),
                span: hit.span,
            };
            match hit.rule {
                Rule::Pii(kind) if allow.contains(&kind) => self.allowed.push(finding),
                _ => self.refusals.push(Refusal::Finding(finding)),
            }
        }
    }
}

/// The path of member `key` of the object at `path`.
fn member(path: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{path}.{key}")
    } else {
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| "\"?\"".to_owned());
        format!("{path}[{quoted}]")
    }
}

/// The JSON type name of `value`, for wrong-type refusals.
pub(super) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "text",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
