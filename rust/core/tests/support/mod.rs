//! Test-only helpers shared by `tests/properties.rs` and the fuzz targets (`fuzz/`, which
//! include this file by path): an owned turn, a decoder of the canonical encoding (its left
//! inverse, the real proof that the encoding is injective), an independent encoder written
//! from SPEC §3, a JSON writer that writes what Python's `json.dumps` writes, and an owned
//! stored row (possibly not a valid turn).
#![allow(dead_code)]

use std::fmt::Write as _;

use ledgerfold_core::revalidate::TurnRow;
use ledgerfold_core::{ProtectionReason, Role, TurnRef};

/// A turn that owns its fields; `meta` sorted by key bytes, keys unique and non-empty.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedTurn {
    pub id: String,
    pub sequence: i64,
    pub role: Role,
    pub protected: bool,
    pub protection_reason: Option<ProtectionReason>,
    pub group: Option<String>,
    pub meta: Vec<(String, String)>,
    pub body: String,
}

impl OwnedTurn {
    pub fn view(&self) -> TurnRef<'_> {
        TurnRef {
            id: &self.id,
            sequence: self.sequence,
            role: self.role,
            protected: self.protected,
            protection_reason: self.protection_reason,
            group: self.group.as_deref(),
            meta: &self.meta,
            body: &self.body,
        }
    }

    /// True when the fields obey SPEC §2 (what the decoder accepts).
    pub fn is_valid(&self) -> bool {
        !self.id.is_empty()
            && self.sequence >= 0
            && (self.protected || self.protection_reason.is_none())
            && self.group.as_deref() != Some("")
            && self.meta.iter().all(|(key, _)| !key.is_empty())
            && self
                .meta
                .windows(2)
                .all(|pair| pair[0].0.as_bytes() < pair[1].0.as_bytes())
    }
}

/// Why bytes are not the encoding of any valid turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Truncated(&'static str),
    NotUtf8(&'static str),
    BadCode(&'static str, u8),
    Invalid(&'static str),
    Trailing(usize),
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(count)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(DecodeError::Truncated(field))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let raw = self.take(8, field)?;
        Ok(u64::from_le_bytes(raw.try_into().expect("8 bytes")))
    }

    fn byte(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, field)?[0])
    }

    fn text(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let len = usize::try_from(self.u64(field)?).map_err(|_| DecodeError::Truncated(field))?;
        let raw = self.take(len, field)?;
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::NotUtf8(field))
    }
}

/// Parses a canonical encoding back into its turn; accepts exactly the encodings of valid
/// turns (so `encode_turn(decode_turn(b)?) == b` for every accepted `b`).
pub fn decode_turn(bytes: &[u8]) -> Result<OwnedTurn, DecodeError> {
    let mut reader = Reader { bytes, at: 0 };
    let id = reader.text("id")?;
    if id.is_empty() {
        return Err(DecodeError::Invalid("id"));
    }
    let sequence = i64::from_le_bytes(reader.take(8, "sequence")?.try_into().expect("8 bytes"));
    if sequence < 0 {
        return Err(DecodeError::Invalid("sequence"));
    }
    let role_code = reader.byte("role")?;
    let role = Role::ALL
        .into_iter()
        .find(|role| role.code() == role_code)
        .ok_or(DecodeError::BadCode("role", role_code))?;
    let protected = match reader.byte("protected")? {
        0 => false,
        1 => true,
        other => return Err(DecodeError::BadCode("protected", other)),
    };
    let reason_code = reader.byte("protection_reason")?;
    let protection_reason = match reason_code {
        0 => None,
        code => Some(
            ProtectionReason::ALL
                .into_iter()
                .find(|reason| reason.code() == code)
                .ok_or(DecodeError::BadCode("protection_reason", code))?,
        ),
    };
    if protection_reason.is_some() && !protected {
        return Err(DecodeError::Invalid("protection_reason"));
    }
    let group = Some(reader.text("group")?).filter(|group| !group.is_empty());
    let count = reader.u64("meta")?;
    let mut meta: Vec<(String, String)> = Vec::new();
    for _ in 0..count {
        let key = reader.text("meta key")?;
        let value = reader.text("meta value")?;
        if key.is_empty() {
            return Err(DecodeError::Invalid("meta key"));
        }
        if meta
            .last()
            .is_some_and(|(last, _)| last.as_bytes() >= key.as_bytes())
        {
            return Err(DecodeError::Invalid("meta order"));
        }
        meta.push((key, value));
    }
    let body = reader.text("body")?;
    if reader.at != bytes.len() {
        return Err(DecodeError::Trailing(bytes.len() - reader.at));
    }
    Ok(OwnedTurn {
        id,
        sequence,
        role,
        protected,
        protection_reason,
        group,
        meta,
        body,
    })
}

fn spec_lp(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&u64::try_from(text.len()).unwrap().to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// SPEC §3 written out again, independently of `ledgerfold_core::encoding`.
pub fn spec_encoding(turn: &OwnedTurn) -> Vec<u8> {
    let mut out = Vec::new();
    spec_lp(&mut out, &turn.id);
    out.extend_from_slice(&turn.sequence.to_le_bytes());
    out.push(match turn.role {
        Role::System => 1,
        Role::User => 2,
        Role::Assistant => 3,
        Role::Tool => 4,
    });
    out.push(u8::from(turn.protected));
    out.push(match turn.protection_reason {
        None => 0,
        Some(ProtectionReason::PendingConfirmation) => 1,
        Some(ProtectionReason::ActiveConstraint) => 2,
        Some(ProtectionReason::AuditEvidence) => 3,
        Some(ProtectionReason::UnverifiedProvenance) => 4,
    });
    spec_lp(&mut out, turn.group.as_deref().unwrap_or(""));
    let mut meta: Vec<&(String, String)> = turn.meta.iter().collect();
    meta.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.extend_from_slice(&u64::try_from(meta.len()).unwrap().to_le_bytes());
    for (key, value) in meta {
        spec_lp(&mut out, key);
        spec_lp(&mut out, value);
    }
    spec_lp(&mut out, &turn.body);
    out
}

/// A JSON string literal as Python's `json.dumps` writes it: with `ensure_ascii` every
/// character outside printable ASCII becomes `\uXXXX` (astral ones a surrogate pair);
/// without it only quotes, backslashes and control characters are escaped.
pub fn write_json_string(out: &mut String, text: &str, ensure_ascii: bool) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c if c < ' ' || ensure_ascii => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `json.dumps(dict(entries), ensure_ascii=..., separators=(item, key))`, entries in order.
pub fn write_json_object(
    entries: &[(String, String)],
    ensure_ascii: bool,
    item_separator: &str,
    key_separator: &str,
) -> String {
    let mut out = String::from("{");
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            out.push_str(item_separator);
        }
        write_json_string(&mut out, key, ensure_ascii);
        out.push_str(key_separator);
        write_json_string(&mut out, value, ensure_ascii);
    }
    out.push('}');
    out
}

/// Python's default `json.dumps(meta)`: `", "` and `": "`, `ensure_ascii=True`.
pub fn python_json_dumps(entries: &[(String, String)]) -> String {
    write_json_object(entries, true, ", ", ": ")
}

/// A stored row, owned, possibly not a valid turn at all.
#[derive(Clone, Debug)]
pub struct RowSpec {
    pub id: String,
    pub sequence: i64,
    pub role: String,
    pub body: Vec<u8>,
    pub protected: bool,
    pub protection_reason: Option<String>,
    pub group: Option<String>,
    pub meta_json: Option<String>,
}

impl RowSpec {
    pub fn row(&self) -> TurnRow<'_> {
        TurnRow {
            id: &self.id,
            sequence: self.sequence,
            role: &self.role,
            body: &self.body,
            protected: self.protected,
            protection_reason: self.protection_reason.as_deref(),
            group: self.group.as_deref(),
            meta_json: self.meta_json.as_deref(),
        }
    }
}
