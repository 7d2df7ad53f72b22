//! Context assembly (SPEC §8): which ledger turns go raw and where the summary goes. Python
//! builds the one summary item; nothing here calls back into Python.

use ledgerfold_core::assemble::layout;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::check::{sealed_arg, SummaryFields};
use crate::conversation::Conversation;
use crate::extract;
use crate::items::TurnItem;
use crate::units::push_turn;
use crate::untracked::new_untracked;
use ledgerfold_core::chat::ChatRule;

/// `(turn_items, summary_at, through_sequence, fallback, fallback_id, dropped)`.
type AssembleTuple<'py> = (
    Bound<'py, PyTuple>,
    Option<usize>,
    Option<i64>,
    Option<String>,
    Option<String>,
    usize,
);

/// The `TurnItem`s of the turns at `positions`, sharing the ledger's objects (the cycle
/// collector does not track them: see `untracked`), and how many items of the context chat
/// messages leave out (`units::unsendable` over the items, the summary a plain item before
/// `summary_at`), counted in the same pass from the ledger's turns.
fn turn_items<'py>(
    py: Python<'py>,
    conversation: &Conversation,
    positions: impl ExactSizeIterator<Item = usize>,
    summary_at: Option<usize>,
) -> PyResult<(Bound<'py, PyTuple>, usize)> {
    let mut rule = ChatRule::default();
    let mut items = Vec::with_capacity(positions.len());
    for (at, position) in positions.enumerate() {
        if summary_at == Some(at) {
            push_turn(&mut rule, None);
        }
        let turn = &conversation.turns[position];
        push_turn(&mut rule, Some(turn.get()));
        items.push(new_untracked(py, TurnItem::of(py, turn))?);
    }
    if summary_at.is_some_and(|at| at >= items.len()) {
        push_turn(&mut rule, None);
    }
    Ok((PyTuple::new(py, items)?, rule.finish().len()))
}

/// `(turn_items, summary_at, through_sequence, fallback, fallback_id, dropped)` of SPEC §8. When the
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
        let (items, dropped) = turn_items(py, conversation, 0..conversation.turns.len(), None)?;
        Ok((items, None, None, Some(reason), id, dropped))
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
    let (items, dropped) = turn_items(
        py,
        conversation,
        layout.included.iter().copied(),
        Some(layout.summary_at),
    )?;
    Ok((
        items,
        Some(layout.summary_at),
        Some(through_sequence),
        None,
        None,
        dropped,
    ))
}
