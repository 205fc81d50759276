//! [`Token`]: a bearer token that never reaches a log.
//!
//! `Debug` and `Display` print `<redacted>`; the only way to read the secret is
//! [`Token::expose`], so every place that does is easy to find (invariant I11).

use std::fmt;

/// A bearer token (agent or operator). Cheap to clone.
///
/// ```
/// use switchboard_sdk::Token;
/// let token = Token::from("sb_secret");
/// assert_eq!(format!("{token:?} {token}"), "Token(<redacted>) <redacted>");
/// assert_eq!(token.expose(), "sb_secret");
/// ```
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps a token string.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The secret itself. Only for putting it on the wire or into a credential store.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Token {
    fn from(token: String) -> Self {
        Self(token)
    }
}

impl From<&str> for Token {
    fn from(token: &str) -> Self {
        Self(token.to_owned())
    }
}

impl From<&String> for Token {
    fn from(token: &String) -> Self {
        Self(token.clone())
    }
}
