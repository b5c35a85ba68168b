//! A schema's JSON text that can move into a buffer holding the same bytes anyway (a catalog
//! revision's encoding), so that 10,000 tools do not keep their ~14 MB of schemas twice.

use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use bytestring::ByteString;

/// JSON text of a schema. Clones of a tool share it (`Arc`), so moving it moves it for all.
#[derive(Debug)]
pub struct SchemaText(Mutex<ByteString>);

impl SchemaText {
    /// The text, in a buffer of its own or shared with other texts.
    pub fn new(text: ByteString) -> Self {
        Self(Mutex::new(text))
    }

    /// The text (a reference to its buffer, not a copy).
    pub fn get(&self) -> ByteString {
        self.text().clone()
    }

    /// Holds `same` in place of the text it has if the bytes are equal; the buffer held until
    /// now is freed when nothing else holds it. Tells whether it moved.
    pub fn move_to(&self, same: &Bytes) -> bool {
        let mut text = self.text();
        if text.as_bytes() != same || text.as_bytes().as_ptr() == same.as_ptr() {
            return false;
        }
        match ByteString::try_from(same.clone()) {
            Ok(same) => {
                *text = same;
                true
            }
            Err(_) => false,
        }
    }

    /// Copies the text into a buffer of its own if it lies inside `buffer`, so that holding
    /// it does not keep all of `buffer`. Tells whether it copied.
    pub fn move_out_of(&self, buffer: &[u8]) -> bool {
        let mut text = self.text();
        if text.is_empty() || !buffer.as_ptr_range().contains(&text.as_bytes().as_ptr()) {
            return false;
        }
        *text = ByteString::from(String::from(&**text));
        true
    }

    /// The text, locked (only ever for a clone or a single assignment, so a panic elsewhere
    /// cannot leave it half-written).
    fn text(&self) -> MutexGuard<'_, ByteString> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PartialEq for SchemaText {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other) || self.get() == other.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_moves_only_to_equal_bytes() {
        let text = SchemaText::new(ByteString::from(r#"{"type":"object"}"#));
        let buffer = Bytes::from_static(br#"[{"type":"object"},{"type":"string"}]"#);
        assert!(!text.move_to(&buffer.slice(19..36)), "other bytes");
        assert!(text.move_to(&buffer.slice(1..18)));
        assert_eq!(text.get(), r#"{"type":"object"}"#);
        assert_eq!(text.get().as_bytes().as_ptr(), buffer[1..].as_ptr());
        assert!(!text.move_to(&buffer.slice(1..18)), "already there");
        assert!(!text.move_out_of(&buffer[20..]));
        assert!(text.move_out_of(&buffer));
        assert_eq!(text.get(), r#"{"type":"object"}"#);
        assert!(!buffer.as_ptr_range().contains(&text.get().as_ptr()));
    }

    #[test]
    fn texts_are_equal_by_their_bytes() {
        let one = SchemaText::new(ByteString::from("{}"));
        let other = SchemaText::new(ByteString::from(String::from("{}")));
        assert_eq!(one, other);
        assert_ne!(one, SchemaText::new(ByteString::from("{\"a\":1}")));
    }
}
