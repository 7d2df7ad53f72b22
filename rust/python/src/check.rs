//! Whether a summary is current (SPEC §6), from the conversation's cached digests only.

use ledgerfold_core::check::{check_summary, group_split, CheckReason, CheckResult, SummaryRef};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

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
    pub fn check(&self, conversation: &Conversation, policy_version: &str) -> PyResult<Checked> {
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
        let result = check_summary(&view, &conversation.id, policy_version, |index| {
            let item = self.source_ids.get_borrowed_item(index).ok()?;
            if cursor < ids.len() && item.as_ptr() == ids[cursor].as_ptr() {
                cursor += 1;
                return Some((cursor - 1, &digests[cursor - 1]));
            }
            let text = match extract::string("summary.source_ids", &item) {
                Ok(text) => text.to_str().ok()?,
                Err(err) => {
                    bad_item = Some(err);
                    return None;
                }
            };
            let position = if cursor < ids.len() && ids[cursor].bind(py).to_str().ok()? == text {
                cursor
            } else {
                conversation.position(text)?
            };
            cursor = position + 1;
            Some((position, &digests[position]))
        });
        if let Some(err) = bad_item {
            return Err(err);
        }
        if result.is_current() {
            let groups: Vec<Option<&str>> = conversation
                .turns
                .iter()
                .map(|turn| turn.get().group.as_deref())
                .collect();
            if let Some(position) = group_split(&groups, &result.positions) {
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
pub fn check(
    summary: &Bound<'_, PyAny>,
    conversation: &Bound<'_, Conversation>,
    policy_version: &Bound<'_, PyAny>,
) -> PyResult<CheckTuple> {
    let policy_version = extract::string("policy_version", policy_version)?;
    let fields = SummaryFields::read(summary)?;
    let checked = fields.check(conversation.get(), policy_version.to_str()?)?;
    Ok((
        checked.result.is_current(),
        checked.result.reason.map(CheckReason::as_str),
        checked.turn_id,
    ))
}
