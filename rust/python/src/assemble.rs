//! Context assembly (SPEC §8): which ledger turns go raw and where the summary goes. Python
//! builds the one summary item; nothing here calls back into Python.

use ledgerfold_core::assemble::layout;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::check::{sealed_arg, SummaryFields};
use crate::conversation::Conversation;
use crate::extract;
use crate::items::TurnItem;
use crate::untracked::new_untracked;

/// `(turn_items, summary_at, through_sequence, fallback, fallback_id)`.
type AssembleTuple<'py> = (
    Bound<'py, PyTuple>,
    Option<usize>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// The `TurnItem`s of the turns at `positions`, sharing the ledger's objects; the cycle
/// collector does not track them (see `untracked`).
fn turn_items<'py>(
    py: Python<'py>,
    conversation: &Conversation,
    positions: impl ExactSizeIterator<Item = usize>,
) -> PyResult<Bound<'py, PyTuple>> {
    let items = positions
        .map(|position| new_untracked(py, TurnItem::of(py, &conversation.turns[position])))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// `(turn_items, summary_at, through_sequence, fallback, fallback_id)` of SPEC §8. When the
/// summary is used, its item goes before `turn_items[summary_at]` with `through_sequence`;
/// otherwise every turn is raw and `fallback` says why.
#[pyfunction]
#[pyo3(signature = (conversation, summary, policy_version, preserved_ids, sealed=None))]
pub fn assemble<'py>(
    py: Python<'py>,
    conversation: &Bound<'py, Conversation>,
    summary: Option<&Bound<'py, PyAny>>,
    policy_version: &Bound<'py, PyAny>,
    preserved_ids: Option<&Bound<'py, PyAny>>,
    sealed: Option<&Bound<'py, PyAny>>,
) -> PyResult<AssembleTuple<'py>> {
    let sealed = sealed_arg(sealed)?;
    let policy_version = extract::string("policy_version", policy_version)?;
    let preserved = preserved_ids
        .filter(|ids| !ids.is_none())
        .map(|ids| extract::string_items("preserved_ids", ids))
        .transpose()?;
    let conversation = conversation.get();
    let raw = |reason: String, id: Option<String>| -> PyResult<AssembleTuple<'py>> {
        let items = turn_items(py, conversation, 0..conversation.turns.len())?;
        Ok((items, None, None, Some(reason), id))
    };
    let Some(summary) = summary.filter(|summary| !summary.is_none()) else {
        return raw("no-summary".to_owned(), None);
    };
    let fields = SummaryFields::read(summary)?;
    let checked = fields.check(conversation, policy_version.to_str()?, sealed.as_ref())?;
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
    // A current summary's live sources all exist and are in ascending ledger order; sealed
    // ones sort before every live turn, so a summary with only sealed sources goes first,
    // its slot just below the first live turn (SPEC §15.5).
    let positions = checked.result.positions;
    let through_sequence = match positions.last() {
        Some(&last) => conversation.turn(last).sequence,
        None if conversation.turns.is_empty() => 0,
        None => conversation.turn(0).sequence - 1,
    };
    let layout = layout(conversation.turns.len(), &positions);
    let items = turn_items(py, conversation, layout.included.iter().copied())?;
    Ok((
        items,
        Some(layout.summary_at),
        Some(through_sequence),
        None,
        None,
    ))
}
