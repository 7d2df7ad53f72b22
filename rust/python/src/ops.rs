//! The per-turn work of SPEC §3–8, done natively over cached digests.

use std::collections::{HashMap, HashSet};

use ledgerfold_core::assemble::layout;
use ledgerfold_core::check::{check_summary, CheckReason, CheckResult, SummaryRef};
use ledgerfold_core::fingerprint::Fingerprinter;
use ledgerfold_core::ids;
use ledgerfold_core::plan::{plan_layout, PlanInput};
use ledgerfold_core::{CoreError, Problem};
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList, PyString, PyTuple};

use crate::conversation::{collect_turns, Conversation};
use crate::errors::{invalid, to_py_err};
use crate::extract;
use crate::items::TurnItem;
use crate::turn::Turn;

/// Strings of an iterable, borrowed from their Python objects.
fn string_items<'py>(
    field: &'static str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Vec<Bound<'py, PyString>>> {
    if value.is_instance_of::<PyString>() {
        return Err(extract::wrong_type(field, "an iterable of str", value));
    }
    let iterator = PyIterator::from_object(value)
        .map_err(|_| extract::wrong_type(field, "an iterable of str", value))?;
    let mut out = Vec::with_capacity(value.len().unwrap_or(0));
    for item in iterator {
        let item = item?;
        out.push(extract::string(field, &item)?.clone());
    }
    Ok(out)
}

fn as_strs<'a>(items: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    items.iter().map(|item| item.to_str()).collect()
}

/// `lf1:` fingerprint over the turns' cached digests, in the order given.
#[pyfunction]
pub fn fingerprint_turns(py: Python<'_>, turns: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(conversation) = turns.cast::<Conversation>() {
        let digests = &conversation.get().digests;
        return Ok(ledgerfold_core::fingerprint_hex(digests.iter()));
    }
    if let Ok(list) = turns.cast::<PyList>() {
        let mut fingerprint = Fingerprinter::new(list.len());
        for item in list.iter() {
            let turn = item
                .cast::<Turn>()
                .map_err(|_| extract::wrong_type("turns", "an iterable of Turn", &item))?;
            fingerprint.push(&turn.get().digest);
        }
        return Ok(fingerprint.finish_hex());
    }
    if let Ok(tuple) = turns.cast::<PyTuple>() {
        let mut fingerprint = Fingerprinter::new(tuple.len());
        for item in tuple.iter() {
            let turn = item
                .cast::<Turn>()
                .map_err(|_| extract::wrong_type("turns", "an iterable of Turn", &item))?;
            fingerprint.push(&turn.get().digest);
        }
        return Ok(fingerprint.finish_hex());
    }
    let turns = collect_turns(py, "turns", turns)?;
    let mut fingerprint = Fingerprinter::new(turns.len());
    for turn in &turns {
        fingerprint.push(&turn.get().digest);
    }
    Ok(fingerprint.finish_hex())
}

/// `lf1:` fingerprint over turn digests given back to back (32 bytes each), e.g. the stored
/// digests of a summary's sources followed by those of the turns it adds.
#[pyfunction]
pub fn fingerprint_digests(py: Python<'_>, digests: &[u8]) -> PyResult<String> {
    if digests.len() % 32 != 0 {
        return Err(invalid(
            py,
            "digests",
            Problem::OutOfRange,
            "must be 32 bytes per digest",
        ));
    }
    let mut fingerprint = Fingerprinter::new(digests.len() / 32);
    for digest in digests.chunks_exact(32) {
        fingerprint.push(digest.try_into().expect("chunks of 32"));
    }
    Ok(fingerprint.finish_hex())
}

/// True when both have the same length and the same ID at every position.
#[pyfunction]
pub fn same_ordered_ids(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    let a = string_items("a", a)?;
    let b = string_items("b", b)?;
    Ok(ids::same_ordered_ids(&as_strs(&a)?, &as_strs(&b)?))
}

/// `(compacted_ids, preserved_ids, through_sequence)` of SPEC §4; the turns named in
/// `pinned` (preserved roles, open tool calls: SPEC §15.3) stay raw like protected ones.
#[pyfunction]
#[pyo3(signature = (conversation, keep_tail, pinned=None))]
pub fn plan<'py>(
    py: Python<'py>,
    conversation: &Bound<'py, Conversation>,
    keep_tail: &Bound<'py, PyAny>,
    pinned: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyTuple>, i64)> {
    let keep_tail = extract::int64("keep_tail", keep_tail)?;
    if keep_tail < 1 {
        return Err(invalid(
            py,
            "keep_tail",
            Problem::OutOfRange,
            "must be >= 1",
        ));
    }
    let pinned = pinned
        .filter(|ids| !ids.is_none())
        .map(|ids| string_items("pinned", ids))
        .transpose()?;
    let pinned: HashSet<&str> = match &pinned {
        Some(ids) => ids.iter().map(|id| id.to_str()).collect::<PyResult<_>>()?,
        None => HashSet::new(),
    };
    let conversation = conversation.get();
    let inputs: Vec<PlanInput<'_>> = conversation
        .turns
        .iter()
        .map(|turn| {
            let turn = turn.get();
            PlanInput {
                protected: turn.protected || (!pinned.is_empty() && pinned.contains(&*turn.id)),
                group: turn.group.as_deref(),
            }
        })
        .collect();
    let layout = plan_layout(&inputs, usize::try_from(keep_tail).unwrap_or(usize::MAX));
    let through_sequence = layout
        .compacted
        .last()
        .map_or(0, |&p| conversation.turn(p).sequence);
    let ids_at = |positions: &[usize]| {
        PyTuple::new(py, positions.iter().map(|&p| conversation.ids[p].bind(py)))
    };
    Ok((
        ids_at(&layout.compacted)?,
        ids_at(&layout.preserved)?,
        through_sequence,
    ))
}

/// The fields of a summary envelope that checking needs, read from any object.
struct SummaryFields<'py> {
    id: Bound<'py, PyString>,
    conversation_id: Bound<'py, PyString>,
    policy_version: Bound<'py, PyString>,
    source_ids: Bound<'py, PyTuple>,
    source_fingerprint: Bound<'py, PyString>,
}

struct Checked {
    result: CheckResult,
    turn_id: Option<String>,
}

impl<'py> SummaryFields<'py> {
    fn read(summary: &Bound<'py, PyAny>) -> PyResult<Self> {
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
                string_items("summary.source_ids", &source_ids)?,
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
    fn check(&self, conversation: &Conversation, policy_version: &str) -> PyResult<Checked> {
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

fn raw_items<'py>(py: Python<'py>, conversation: &Conversation) -> PyResult<Bound<'py, PyTuple>> {
    let items = conversation
        .turns
        .iter()
        .map(|turn| {
            Py::new(
                py,
                TurnItem {
                    turn: turn.clone_ref(py),
                },
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

type AssembleTuple<'py> = (Bound<'py, PyTuple>, Option<String>, Option<String>);

/// `(items, fallback, fallback_id)` of SPEC §8; `make_summary_item(through_sequence)` builds
/// the summary's item once it is known to be used.
#[pyfunction]
#[pyo3(signature = (conversation, summary, policy_version, preserved_ids, make_summary_item))]
pub fn assemble<'py>(
    py: Python<'py>,
    conversation: &Bound<'py, Conversation>,
    summary: Option<&Bound<'py, PyAny>>,
    policy_version: &Bound<'py, PyAny>,
    preserved_ids: Option<&Bound<'py, PyAny>>,
    make_summary_item: &Bound<'py, PyAny>,
) -> PyResult<AssembleTuple<'py>> {
    let policy_version = extract::string("policy_version", policy_version)?;
    let preserved = preserved_ids
        .filter(|ids| !ids.is_none())
        .map(|ids| string_items("preserved_ids", ids))
        .transpose()?;
    let conversation = conversation.get();
    let raw = |reason: String, id: Option<String>| -> PyResult<AssembleTuple<'py>> {
        Ok((raw_items(py, conversation)?, Some(reason), id))
    };
    let Some(summary) = summary.filter(|summary| !summary.is_none()) else {
        return raw("no-summary".to_owned(), None);
    };
    let fields = SummaryFields::read(summary)?;
    let checked = fields.check(conversation, policy_version.to_str()?)?;
    if let Some(reason) = checked.result.reason {
        return raw(
            format!("stale-summary:{}", reason.as_str()),
            checked.turn_id,
        );
    }
    if let Some(preserved) = &preserved {
        for id in preserved {
            let id = id.to_str()?;
            if conversation.position(id).is_none() {
                return raw("preserved-missing".to_owned(), Some(id.to_owned()));
            }
        }
    }
    let summary_id = fields.id.to_str()?;
    if conversation.position(summary_id).is_some() {
        return raw("duplicate-id".to_owned(), Some(summary_id.to_owned()));
    }
    // A current summary's sources all exist and are in ascending ledger order.
    let positions = checked.result.positions;
    let through_sequence = conversation
        .turn(*positions.last().expect("current summary has sources"))
        .sequence;
    let layout = layout(conversation.turns.len(), &positions);
    let mut items: Vec<Bound<'py, PyAny>> = Vec::with_capacity(layout.included.len() + 1);
    for (slot, &position) in layout.included.iter().enumerate() {
        if slot == layout.summary_at {
            items.push(make_summary_item.call1((through_sequence,))?);
        }
        items.push(
            Bound::new(
                py,
                TurnItem {
                    turn: conversation.turns[position].clone_ref(py),
                },
            )?
            .into_any(),
        );
    }
    if layout.summary_at == layout.included.len() {
        items.push(make_summary_item.call1((through_sequence,))?);
    }
    Ok((PyTuple::new(py, items)?, None, None))
}

/// Fingerprint over the turns with these IDs in sequence order; `None` if any is missing.
#[pyfunction]
pub fn source_fingerprint(
    py: Python<'_>,
    source_ids: &Bound<'_, PyAny>,
    turns: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    let source_ids = string_items("source_ids", source_ids)?;
    let mut found: Vec<&Turn> = Vec::with_capacity(source_ids.len());
    let owned;
    if let Ok(conversation) = turns.cast::<Conversation>() {
        let conversation = conversation.get();
        for id in &source_ids {
            match conversation.position(id.to_str()?) {
                Some(position) => found.push(conversation.turn(position)),
                None => return Ok(None),
            }
        }
    } else {
        owned = collect_turns(py, "turns", turns)?;
        let mut index: HashMap<&str, &Turn> = HashMap::with_capacity(owned.len());
        for turn in &owned {
            let turn = turn.get();
            if index.insert(&turn.id, turn).is_some() {
                return Err(to_py_err(
                    py,
                    CoreError::DuplicateId {
                        id: turn.id.to_string(),
                    },
                ));
            }
        }
        for id in &source_ids {
            match index.get(id.to_str()?) {
                Some(turn) => found.push(turn),
                None => return Ok(None),
            }
        }
    }
    found.sort_by_key(|turn| turn.sequence);
    let mut fingerprint = Fingerprinter::new(found.len());
    for turn in found {
        fingerprint.push(&turn.digest);
    }
    Ok(Some(fingerprint.finish_hex()))
}
