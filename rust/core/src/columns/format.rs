//! The packed format: how one `SQLite` aggregate query hands a whole batch over, by column.
//!
//! Per text column, the byte lengths as [`SEPARATOR`]-separated decimals ([`NULL_LENGTH`]
//! for NULL) and the values concatenated; per integer column, the values as separated
//! decimals. Each turn row carries one integer key ([`turn_key`]): which of the batch's
//! summaries it was read for, and its role, protection flag and protection reason as
//! SPEC §3 codes; each source row one key ([`source_key`]): which summary, at which
//! position, and the byte length of the turn ID it cites, the IDs back to back.
//!
//! The query that writes this is generated in Python from these constants (the native
//! module exports them), so the two sides cannot disagree on a number. Decoding is strict:
//! a packing that does not line up (counts or lengths that disagree, an ID that is not
//! UTF-8, an entry that is not a key) is refused as a whole with `None`, so the caller
//! reads that batch row by row instead; a single field that cannot be read (a role that is
//! not UTF-8, a sequence that is not an integer) makes its row an invalid turn, as a stored
//! row that no longer is a valid turn always is.

use crate::exec::Exec;
use crate::model::{ProtectionReason, Role};
use crate::revalidate::{TurnRow, UNREADABLE_ROLE};

/// Separates the entries of a list (lengths, integers, keys).
pub const SEPARATOR: u8 = b',';
/// The length entry of a NULL text value.
pub const NULL_LENGTH: i64 = -1;

/// The multipliers of a turn key, `summary * TURN_KEY_SUMMARY + role * TURN_KEY_ROLE +
/// protected * TURN_KEY_PROTECTED + reason * TURN_KEY_REASON`: one decimal digit each for
/// the role code, the protection flag (0 or 1) and the reason code (0 for none).
pub const TURN_KEY_SUMMARY: i64 = 1000;
pub const TURN_KEY_ROLE: i64 = 100;
pub const TURN_KEY_PROTECTED: i64 = 10;
pub const TURN_KEY_REASON: i64 = 1;
/// The digit of a role, flag or reason that no valid turn has (an unknown role or reason, a
/// protection flag that is not an integer).
pub const UNKNOWN_CODE: i64 = 9;

/// Bits of a source key below the summary index, and below the position; the widths of the
/// position and of the ID length.
pub const SOURCE_SUMMARY_SHIFT: u32 = 54;
pub const SOURCE_POSITION_SHIFT: u32 = 26;
pub const SOURCE_POSITION_BITS: u32 = SOURCE_SUMMARY_SHIFT - SOURCE_POSITION_SHIFT;
pub const SOURCE_ID_LENGTH_BITS: u32 = SOURCE_POSITION_SHIFT;

/// How many summaries one batch may name (an index fits a byte in a source key).
pub const MAX_SUMMARIES: usize = 1 << 8;

// Each code is one digit below the unknown one, and each digit has its own place.
const _: () = {
    let mut index = 0;
    while index < Role::ALL.len() {
        assert!((Role::ALL[index] as i64) < UNKNOWN_CODE);
        index += 1;
    }
    let mut index = 0;
    while index < ProtectionReason::ALL.len() {
        assert!(0 < (ProtectionReason::ALL[index] as i64));
        assert!((ProtectionReason::ALL[index] as i64) < UNKNOWN_CODE);
        index += 1;
    }
    assert!(UNKNOWN_CODE < 10);
    assert!(TURN_KEY_REASON == 1);
    assert!(TURN_KEY_PROTECTED == 10 * TURN_KEY_REASON);
    assert!(TURN_KEY_ROLE == 10 * TURN_KEY_PROTECTED);
    assert!(TURN_KEY_SUMMARY == 10 * TURN_KEY_ROLE);
    // The largest summary index still leaves a source key non-negative.
    assert!(((MAX_SUMMARIES as u64 - 1) << SOURCE_SUMMARY_SHIFT) < 1 << 63);
};

/// One text column: byte lengths ([`NULL_LENGTH`] for NULL) and the values back to back.
#[derive(Clone, Copy, Debug, Default)]
pub struct Packed<'a> {
    pub lengths: &'a [u8],
    pub values: &'a [u8],
}

/// The columns of the `turns` rows of a batch, each in the same row order; the rows read for
/// one summary come together.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurnColumns<'a> {
    /// One [`turn_key`] per row.
    pub keys: &'a [u8],
    pub id: Packed<'a>,
    pub sequence: &'a [u8],
    pub body: Packed<'a>,
    pub group: Packed<'a>,
    pub meta: Packed<'a>,
}

/// The columns of `summary_sources` rows, in any order: one [`source_key`] per row, and the
/// turn IDs back to back.
#[derive(Clone, Copy, Debug, Default)]
pub struct SourceColumns<'a> {
    pub keys: &'a [u8],
    pub turn_ids: &'a [u8],
}

/// The key of a turn row: the summary index, then the digits of the role code, protection
/// flag and reason code (each [`UNKNOWN_CODE`] for a value no valid turn has).
#[must_use]
pub fn turn_key(summary: usize, role: i64, protected: i64, reason: i64) -> Option<i64> {
    let digit = 0..=UNKNOWN_CODE;
    (digit.contains(&role) && digit.contains(&protected) && digit.contains(&reason)).then_some(
        i64::try_from(summary)
            .ok()?
            .checked_mul(TURN_KEY_SUMMARY)?
            .checked_add(
                role * TURN_KEY_ROLE + protected * TURN_KEY_PROTECTED + reason * TURN_KEY_REASON,
            )?,
    )
}

/// `(summary index, flags)` of a turn key, or `None` when it is negative.
fn split_key(key: i64) -> Option<(usize, i64)> {
    let key = u64::try_from(key).ok()?;
    let summary = TURN_KEY_SUMMARY.unsigned_abs();
    Some((
        usize::try_from(key / summary).ok()?,
        i64::try_from(key % summary).ok()?,
    ))
}

/// `(role code, protected code, reason code)` of the flags of a turn key.
fn split_flags(flags: i64) -> (i64, i64, i64) {
    (
        flags / TURN_KEY_ROLE,
        flags % TURN_KEY_ROLE / TURN_KEY_PROTECTED,
        flags % TURN_KEY_PROTECTED / TURN_KEY_REASON,
    )
}

/// The key of a source row: `summary << 54 | position << 26 | id_len`, for a position below
/// 2^28 and an ID below 64 MiB (for anything else the query writes an entry that is not a
/// key, and the packing is refused).
#[must_use]
pub fn source_key(summary: u8, position: u32, id_len: u32) -> Option<i64> {
    (position < 1 << SOURCE_POSITION_BITS && id_len < 1 << SOURCE_ID_LENGTH_BITS).then(|| {
        i64::from(summary) << SOURCE_SUMMARY_SHIFT
            | i64::from(position) << SOURCE_POSITION_SHIFT
            | i64::from(id_len)
    })
}

/// `(summary index, position, ID length)` of a source key, or `None` when it is negative.
fn split_source_key(key: i64) -> Option<(usize, i64, usize)> {
    let key = u64::try_from(key).ok()?;
    let low = |bits: u32, value: u64| value & ((1 << bits) - 1);
    Some((
        usize::try_from(key >> SOURCE_SUMMARY_SHIFT).ok()?,
        i64::try_from(low(SOURCE_POSITION_BITS, key >> SOURCE_POSITION_SHIFT)).ok()?,
        usize::try_from(low(SOURCE_ID_LENGTH_BITS, key)).ok()?,
    ))
}

/// The entries of a list; an empty list has none.
fn entries(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut parts = list.split(|&byte| byte == SEPARATOR);
    if list.is_empty() {
        parts.next();
    }
    parts
}

/// A decimal integer as `SQLite` writes one: an optional `-`, then digits.
fn integer(entry: &[u8]) -> Option<i64> {
    let (negative, digits) = match entry.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, entry),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        // Accumulate negatively so that i64::MIN parses too.
        value = value
            .checked_mul(10)?
            .checked_sub(i64::from(digit - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// The values of a text column, `None` for NULL, or `None` overall when it does not line up.
fn values(column: Packed<'_>) -> Option<Vec<Option<&[u8]>>> {
    let mut at = 0usize;
    let mut out = Vec::with_capacity(column.lengths.len() / 2 + 1);
    for entry in entries(column.lengths) {
        let length = integer(entry)?;
        if length == NULL_LENGTH {
            out.push(None);
            continue;
        }
        let end = at.checked_add(usize::try_from(length).ok()?)?;
        out.push(Some(column.values.get(at..end)?));
        at = end;
    }
    (at == column.values.len()).then_some(out)
}

fn integers(list: &[u8]) -> Vec<Option<i64>> {
    entries(list).map(integer).collect()
}

/// Required text: present and UTF-8, or the packing is refused.
fn required(value: Option<&[u8]>) -> Option<&str> {
    std::str::from_utf8(value?).ok()
}

fn role_of(code: i64) -> Option<&'static str> {
    Role::ALL
        .into_iter()
        .find(|role| i64::from(role.code()) == code)
        .map(Role::as_str)
}

fn reason_of(code: i64) -> Option<&'static str> {
    ProtectionReason::ALL
        .into_iter()
        .find(|reason| i64::from(reason.code()) == code)
        .map(ProtectionReason::as_str)
}

/// Role, protected and reason of the flags of a key, or `None` when any is unreadable.
fn decode_flags(flags: i64) -> Option<(&'static str, bool, Option<&'static str>)> {
    let (role, protected, reason) = split_flags(flags);
    let protected = match protected {
        0 => false,
        1 => true,
        _ => return None,
    };
    let reason = match reason {
        0 => None,
        code => Some(reason_of(code)?),
    };
    Some((role_of(role)?, protected, reason))
}

/// The keys of a packed turn column as `(summary index, flags)`, or `None` when one is not
/// a key.
fn keys(list: &[u8]) -> Option<Vec<(usize, i64)>> {
    entries(list)
        .map(|entry| split_key(integer(entry)?))
        .collect()
}

/// The turn columns of a batch unpacked, each to one entry per row.
pub struct TurnEntries<'a> {
    keys: Vec<(usize, i64)>,
    ids: Vec<Option<&'a [u8]>>,
    sequences: Vec<Option<i64>>,
    bodies: Vec<Option<&'a [u8]>>,
    groups: Vec<Option<&'a [u8]>>,
    metas: Vec<Option<&'a [u8]>>,
}

impl<'a> TurnEntries<'a> {
    /// The columns unpacked (in parallel as `exec` says), or `None` when they do not line up.
    pub fn unpack(columns: &TurnColumns<'a>, exec: Exec) -> Option<Self> {
        let ((keys, ids), ((bodies, sequences), (groups, metas))) = exec.join(
            || exec.join(|| keys(columns.keys), || values(columns.id)),
            || {
                exec.join(
                    || exec.join(|| values(columns.body), || integers(columns.sequence)),
                    || exec.join(|| values(columns.group), || values(columns.meta)),
                )
            },
        );
        let entries = TurnEntries {
            keys: keys?,
            ids: ids?,
            sequences,
            bodies: bodies?,
            groups: groups?,
            metas: metas?,
        };
        let count = entries.len();
        let lengths = [
            entries.ids.len(),
            entries.sequences.len(),
            entries.bodies.len(),
            entries.groups.len(),
            entries.metas.len(),
        ];
        lengths
            .iter()
            .all(|&length| length == count)
            .then_some(entries)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The index of the summary row `index` was read for.
    pub fn summary(&self, index: usize) -> usize {
        self.keys[index].0
    }

    /// Row `index`, or `None` when its ID is not readable (the packing is then refused).
    pub fn row(&self, index: usize) -> Option<TurnRow<'a>> {
        let text = |value: Option<&'a [u8]>| value.map(std::str::from_utf8);
        let group = text(self.groups[index]);
        let meta = text(self.metas[index]);
        let decoded = decode_flags(self.keys[index].1);
        let readable = decoded.is_some()
            && !matches!(group, Some(Err(_)))
            && !matches!(meta, Some(Err(_)))
            && self.bodies[index].is_some()
            && self.sequences[index].is_some();
        let (role, protected, protection_reason) = match decoded {
            Some(decoded) if readable => decoded,
            _ => (UNREADABLE_ROLE, false, None),
        };
        Some(TurnRow {
            id: required(self.ids[index])?,
            sequence: self.sequences[index].unwrap_or(-1),
            role,
            body: self.bodies[index].unwrap_or_default(),
            protected,
            protection_reason,
            group: group.and_then(Result::ok),
            meta_json: meta.and_then(Result::ok),
        })
    }
}

/// Calls `visit(summary index, position, turn ID)` for each source row, in packed order;
/// `None` when the packing does not line up (an entry that is not a key, ID lengths that do
/// not add up to the IDs, an ID that is not UTF-8) or `visit` refuses an entry.
pub fn visit_sources<'a>(
    columns: &SourceColumns<'a>,
    mut visit: impl FnMut(usize, i64, &'a str) -> Option<()>,
) -> Option<()> {
    let mut at = 0usize;
    for entry in entries(columns.keys) {
        let (summary, position, length) = split_source_key(integer(entry)?)?;
        let end = at.checked_add(length)?;
        visit(
            summary,
            position,
            required(Some(columns.turn_ids.get(at..end)?))?,
        )?;
        at = end;
    }
    (at == columns.turn_ids.len()).then_some(())
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
