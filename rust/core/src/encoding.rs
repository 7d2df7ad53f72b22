//! Canonical turn encoding and turn digest (SPEC §3), byte-exact and language-independent.

use crate::model::{ProtectionReason, Role};

/// BLAKE3 `derive_key` context of a turn digest.
pub const TURN_CONTEXT: &str = "ledgerfold v1 turn";

/// A borrowed view of one turn's encoded fields.
///
/// `meta` must be sorted by the UTF-8 bytes of its keys, keys unique
/// (see [`crate::model::normalise_meta`]).
#[derive(Clone, Copy, Debug)]
pub struct TurnRef<'a> {
    pub id: &'a str,
    pub sequence: i64,
    pub role: Role,
    pub protected: bool,
    pub protection_reason: Option<ProtectionReason>,
    pub group: Option<&'a str>,
    pub meta: &'a [(String, String)],
    pub body: &'a str,
}

/// Where encoded bytes go: a buffer, or straight into a hasher so bodies are never copied.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Sink for blake3::Hasher {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

fn put_len(sink: &mut impl Sink, len: usize) {
    // usize -> u64 is lossless on every supported target.
    sink.put(&(len as u64).to_le_bytes());
}

fn put_lp(sink: &mut impl Sink, text: &str) {
    put_len(sink, text.len());
    sink.put(text.as_bytes());
}

/// Writes the canonical encoding of `turn` into `sink`.
pub fn encode_turn_into(turn: &TurnRef<'_>, sink: &mut impl Sink) {
    debug_assert!(
        turn.meta
            .windows(2)
            .all(|w| w[0].0.as_bytes() < w[1].0.as_bytes()),
        "meta must be sorted by key bytes with unique keys"
    );
    put_lp(sink, turn.id);
    sink.put(&turn.sequence.to_le_bytes());
    sink.put(&[
        turn.role.code(),
        u8::from(turn.protected),
        turn.protection_reason.map_or(0, ProtectionReason::code),
    ]);
    put_lp(sink, turn.group.unwrap_or(""));
    put_len(sink, turn.meta.len());
    for (key, value) in turn.meta {
        put_lp(sink, key);
        put_lp(sink, value);
    }
    put_lp(sink, turn.body);
}

/// The canonical encoding of `turn` as bytes.
pub fn encode_turn(turn: &TurnRef<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + turn.id.len() + turn.body.len());
    encode_turn_into(turn, &mut out);
    out
}

/// `BLAKE3 derive_key("ledgerfold v1 turn", encoding)`, streamed without materialising the encoding.
pub fn turn_digest(turn: &TurnRef<'_>) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new_derive_key(TURN_CONTEXT);
    encode_turn_into(turn, &mut hasher);
    *hasher.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain<'a>(id: &'a str, body: &'a str) -> TurnRef<'a> {
        TurnRef {
            id,
            sequence: 1,
            role: Role::User,
            protected: false,
            protection_reason: None,
            group: None,
            meta: &[],
            body,
        }
    }

    #[test]
    fn streamed_digest_equals_digest_of_buffer() {
        let meta = vec![("a".to_string(), "1".to_string())];
        let mut turn = plain("m1", "hello 世界");
        turn.meta = &meta;
        turn.group = Some("g");
        let buffered = blake3::Hasher::new_derive_key(TURN_CONTEXT)
            .update(&encode_turn(&turn))
            .finalize();
        assert_eq!(turn_digest(&turn), *buffered.as_bytes());
    }

    #[test]
    fn length_prefixes_separate_id_from_body() {
        // Without length prefixes these two would concatenate to the same bytes.
        assert_ne!(
            turn_digest(&plain("ab", "c")),
            turn_digest(&plain("a", "bc"))
        );
    }

    #[test]
    fn absent_group_encodes_as_empty_string() {
        let turn = plain("x", "");
        let bytes = encode_turn(&turn);
        // lp("x") = 8 + 1, sequence 8, role/protected/reason 3, then lp("") = 8 zero bytes.
        assert_eq!(&bytes[20..28], &[0u8; 8]);
    }
}
