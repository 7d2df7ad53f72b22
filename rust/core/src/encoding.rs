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
    encode_fields_into(turn, turn.body.as_bytes(), sink);
}

/// The encoding of `turn`'s fields with `body` as its body bytes (`turn.body` unused).
fn encode_fields_into(turn: &TurnRef<'_>, body: &[u8], sink: &mut impl Sink) {
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
    put_len(sink, body.len());
    sink.put(body);
}

/// The canonical encoding of `turn` as bytes.
pub fn encode_turn(turn: &TurnRef<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + turn.id.len() + turn.body.len());
    encode_turn_into(turn, &mut out);
    out
}

/// The derive-key context hashed once per process, not once per turn.
fn turn_context_key() -> &'static blake3::hazmat::ContextKey {
    static KEY: std::sync::OnceLock<blake3::hazmat::ContextKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| blake3::hazmat::hash_derive_key_context(TURN_CONTEXT))
}

/// Gathers the small fields of an encoding into one hasher update; large pieces (bodies)
/// go straight through.
struct Gathered<'h> {
    hasher: &'h mut blake3::Hasher,
    buffer: [u8; 256],
    len: usize,
}

impl Gathered<'_> {
    fn flush(&mut self) {
        self.hasher.update(&self.buffer[..self.len]);
        self.len = 0;
    }
}

impl Sink for Gathered<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > self.buffer.len() {
            self.flush();
            if bytes.len() > self.buffer.len() {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buffer[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

fn digest_fields(turn: &TurnRef<'_>, body: &[u8]) -> [u8; 32] {
    use blake3::hazmat::HasherExt;
    let mut hasher = blake3::Hasher::new_from_context_key(turn_context_key());
    let mut gathered = Gathered {
        hasher: &mut hasher,
        buffer: [0; 256],
        len: 0,
    };
    encode_fields_into(turn, body, &mut gathered);
    gathered.flush();
    *hasher.finalize().as_bytes()
}

/// `BLAKE3 derive_key("ledgerfold v1 turn", encoding)`, streamed without materialising the encoding.
pub fn turn_digest(turn: &TurnRef<'_>) -> [u8; 32] {
    digest_fields(turn, turn.body.as_bytes())
}

/// [`turn_digest`] of `turn` with `body` as its body bytes, UTF-8 or not (`turn.body` is
/// unused): what a stored row hashes to before anyone checks that its body is text.
pub(crate) fn turn_digest_of_body(turn: &TurnRef<'_>, body: &[u8]) -> [u8; 32] {
    digest_fields(turn, body)
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
