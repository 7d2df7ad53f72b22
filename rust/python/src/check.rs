//! Whether a summary is current (SPEC §6), from the conversation's cached digests only.

use std::collections::{HashMap, HashSet};

use ledgerfold_core::check::{check_sealed, CheckReason, CheckResult, Source, SummaryRef};
use ledgerfold_core::Problem;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::errors::invalid;

use crate::conversation::Conversation;
use crate::extract;

/// The fields of a summary envelope that checking needs, read from any object.
pub struct SummaryFields<'py> {
    pub id: Bound<'py, PyString>,
    conversation_id: Bound<'py, PyString>,
    policy_version: Bound<'py, PyString>,
    source_ids: Bound<'py, PyTuple>,
    source_fingerprint: Bound<'py, PyString>,
}

/// Sealed sources (SPEC §15.5): turn ID -> the 32-byte digest its summary's source index
/// keeps, for sources purged from the ledger.
pub type Sealed = HashMap<String, [u8; 32]>;

/// The `sealed` argument: None, or a dict of str -> 32 bytes (`InvalidInput` otherwise).
pub fn sealed_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Sealed>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(None);
    };
    let dict = value
        .cast::<PyDict>()
        .map_err(|_| extract::wrong_type("sealed", "a dict of str to bytes", value))?;
    let mut sealed = HashMap::with_capacity(dict.len());
    for (key, digest) in dict.iter() {
        let key = extract::string("sealed", &key)?.to_str()?.to_owned();
        let bytes = digest
            .cast::<PyBytes>()
            .map_err(|_| extract::wrong_type("sealed", "a dict of str to bytes", &digest))?;
        let digest: [u8; 32] = bytes.as_bytes().try_into().map_err(|_| {
            invalid(
                value.py(),
                "sealed",
                Problem::OutOfRange,
                "each digest must be 32 bytes",
            )
        })?;
        sealed.insert(key, digest);
    }
    Ok(Some(sealed))
}

pub struct Checked {
    pub result: CheckResult,
    pub turn_id: Option<String>,
}

impl<'py> SummaryFields<'py> {
    pub fn read(summary: &Bound<'py, PyAny>) -> PyResult<Self> {
        let attribute = |name: &'static str| {
            summary
                .getattr(name)
                .map_err(|_| extract::wrong_type("summary", "a SummaryEnvelope", summary))
        };
        let text = |name: &'static str, field: &'static str| -> PyResult<Bound<'py, PyString>> {
            Ok(extract::string(field, &attribute(name)?)?.clone())
        };
        let source_ids = attribute("source_ids")?;
        let source_ids = match source_ids.cast::<PyTuple>() {
            Ok(tuple) => tuple.clone(),
            Err(_) => PyTuple::new(
                summary.py(),
                extract::string_items("summary.source_ids", &source_ids)?,
            )?,
        };
        Ok(SummaryFields {
            id: text("id", "summary.id")?,
            conversation_id: text("conversation_id", "summary.conversation_id")?,
            policy_version: text("policy_version", "summary.policy_version")?,
            source_ids,
            source_fingerprint: text("source_fingerprint", "summary.source_fingerprint")?,
        })
    }

    /// Resolves the sources by walking the ledger in step with them: a plan's IDs are the
    /// very `str` objects of the conversation, so most steps compare two pointers; other
    /// IDs compare as text at the cursor, and only a skip falls back to the hash index.
    pub fn check(
        &self,
        conversation: &Conversation,
        policy_version: &str,
        sealed: Option<&Sealed>,
    ) -> PyResult<Checked> {
        let py = self.source_ids.py();
        let view = SummaryRef {
            conversation_id: self.conversation_id.to_str()?,
            policy_version: self.policy_version.to_str()?,
            source_count: self.source_ids.len(),
            source_fingerprint: self.source_fingerprint.to_str()?,
        };
        let (ids, digests) = (&conversation.ids, &conversation.digests);
        let mut cursor = 0usize;
        let mut bad_item: Option<PyErr> = None;
        let sealed = sealed.filter(|sealed| !sealed.is_empty());
        let mut sealed_seen: HashSet<&str> = HashSet::new();
        let result = check_sealed(&view, &conversation.id, policy_version, |index| {
            let item = self.source_ids.get_borrowed_item(index).ok()?;
            if sealed.is_none() && cursor < ids.len() && item.as_ptr() == ids[cursor].as_ptr() {
                cursor += 1;
                return Some(Source::Live(cursor - 1, &digests[cursor - 1]));
            }
            let text = match extract::string("summary.source_ids", &item) {
                Ok(text) => text.to_str().ok()?,
                Err(err) => {
                    bad_item = Some(err);
                    return None;
                }
            };
            let position = if cursor < ids.len() && ids[cursor].bind(py).to_str().ok()? == text {
                Some(cursor)
            } else {
                conversation.position(text)
            };
            // A source the ledger no longer holds is resolved from the sealed mapping; a live
            // turn is always checked live, so a sealed entry never hides an edit of it.
            let Some(position) = position else {
                let (key, digest) = sealed.and_then(|sealed| sealed.get_key_value(text))?;
                return Some(if sealed_seen.insert(key.as_str()) {
                    Source::Sealed(digest)
                } else {
                    Source::SealedAgain
                });
            };
            cursor = position + 1;
            Some(Source::Live(position, &digests[position]))
        });
        if let Some(err) = bad_item {
            return Err(err);
        }
        if result.is_current() {
            if let Some(position) = conversation.units().split(&result.positions) {
                return Ok(Checked {
                    result: CheckResult {
                        reason: Some(CheckReason::GroupSplit),
                        source_index: None,
                        positions: Vec::new(),
                    },
                    turn_id: Some(conversation.turn(position).id.to_string()),
                });
            }
        }
        let turn_id = result
            .source_index
            .map(|index| -> PyResult<String> {
                Ok(self
                    .source_ids
                    .get_item(index)?
                    .cast::<PyString>()?
                    .to_str()?
                    .to_owned())
            })
            .transpose()?;
        Ok(Checked { result, turn_id })
    }
}

type CheckTuple = (bool, Option<&'static str>, Option<String>);

/// `(current, reason, turn_id)` of SPEC §6, from cached digests only.
#[pyfunction]
#[pyo3(signature = (summary, conversation, policy_version, sealed=None))]
pub fn check(
    summary: &Bound<'_, PyAny>,
    conversation: &Bound<'_, Conversation>,
    policy_version: &Bound<'_, PyAny>,
    sealed: Option<&Bound<'_, PyAny>>,
) -> PyResult<CheckTuple> {
    let policy_version = extract::string("policy_version", policy_version)?;
    let fields = SummaryFields::read(summary)?;
    let sealed = sealed_arg(sealed)?;
    let checked = fields.check(
        conversation.get(),
        policy_version.to_str()?,
        sealed.as_ref(),
    )?;
    Ok((
        checked.result.is_current(),
        checked.result.reason.map(CheckReason::as_str),
        checked.turn_id,
    ))
}
