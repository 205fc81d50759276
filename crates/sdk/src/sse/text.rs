//! [`TextDecoder`]: turns the response bytes into the text `eventsource-stream` parses.
//!
//! WHATWG §9.2.5 decodes an event stream as UTF-8 always, strips one leading BOM
//! and replaces invalid sequences with U+FFFD. `eventsource-stream` 0.2.3 gets two of
//! these wrong, so they are done here, before it sees the bytes:
//! - it strips a leading BOM with `&text[1..]`, which panics (U+FEFF is 3 bytes);
//! - it buffers after an invalid byte forever instead of replacing it, stalling the
//!   stream.
//!
//! - at the end of the stream it still waits for an LF after a final CR, so an
//!   event whose blank line ends in a lone CR (`data: x\r\r`) was never dispatched;
//!   a CR alone ends a line (WHATWG §9.2.5), so [`TextDecoder::finish`] adds the LF.
//!
//! The line parsing itself stays the crate's.

/// UTF-8 encoding of U+FEFF.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A comment line: a no-op at the start of a stream. Put in front when the text
/// (after the one stripped BOM) starts with a second U+FEFF, which the spec treats
/// as part of the first field name, so the crate's panicking BOM strip never runs.
const GUARD: &str = ":\n";

/// Incremental, lossy UTF-8 decoder for an event stream.
#[derive(Debug, Default)]
pub(super) struct TextDecoder {
    /// Bytes not decoded yet: a possible BOM prefix, or an incomplete sequence.
    pending: Vec<u8>,
    /// Whether the leading BOM was dealt with.
    bom_checked: bool,
    /// Whether any text was handed out yet.
    emitted: bool,
    /// Whether the text handed out so far ends with a CR.
    ends_with_cr: bool,
}

impl TextDecoder {
    /// Takes the next chunk; returns the text decodable so far (may be empty).
    pub(super) fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        if !self.bom_checked {
            if self.pending.len() < BOM.len() && BOM.starts_with(&self.pending) {
                return String::new();
            }
            self.bom_checked = true;
            if self.pending.starts_with(BOM) {
                self.pending.drain(..BOM.len());
            }
        }
        let mut text = String::with_capacity(self.pending.len());
        let mut rest = &self.pending[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        // An incomplete sequence at the end: wait for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        if !text.is_empty() {
            self.ends_with_cr = text.ends_with('\r');
        }
        self.guard(text)
    }

    /// The end of the stream: whatever is left is an invalid (truncated) sequence,
    /// and a final CR is a whole line end (an LF is added so the parser stops
    /// waiting for one).
    pub(super) fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            return if std::mem::take(&mut self.ends_with_cr) {
                "\n".to_owned()
            } else {
                String::new()
            };
        }
        self.pending.clear();
        self.guard(char::REPLACEMENT_CHARACTER.to_string())
    }

    fn guard(&mut self, text: String) -> String {
        if self.emitted || text.is_empty() {
            return text;
        }
        self.emitted = true;
        if text.starts_with('\u{FEFF}') {
            format!("{GUARD}{text}")
        } else {
            text
        }
    }
}
