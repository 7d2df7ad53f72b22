//! Compaction units (SPEC §17.2) and the chat sequence rule, for Python callers.

use ledgerfold_core::chat::{self, ChatItem};
use ledgerfold_core::model::Role;
use ledgerfold_core::units::{meta_value, tool_call_ids, Units};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::conversation::Conversation;
use crate::errors::invalid;
use crate::items::TurnItem;
use crate::turn::Turn;
use ledgerfold_core::Problem;

/// The unit roots of turns in the order given (the core's one rule).
pub fn roots_of(turns: &[&Turn]) -> Vec<usize> {
    Units::of(
        turns.len(),
        turns.iter().enumerate().map(|(position, turn)| {
            (
                position,
                turn.role,
                turn.group.as_deref(),
                turn.meta_slice(),
            )
        }),
    )
    .roots()
}

/// For each of `turns` (a sequence of `Turn`, in sequence order), the position of the
/// first turn of its compaction unit: equal numbers, one unit. A `Conversation`'s are the
/// ones it keeps.
#[pyfunction]
pub fn unit_roots(py: Python<'_>, turns: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(conversation) = turns.cast::<Conversation>() {
        return Ok(conversation.get().units().roots());
    }
    let mut held: Vec<Bound<'_, Turn>> = Vec::new();
    for (index, item) in turns.try_iter()?.enumerate() {
        let item = item?;
        let Ok(turn) = item.cast_into::<Turn>() else {
            return Err(invalid(
                py,
                "turns",
                Problem::WrongType,
                format!("item {index} must be a Turn"),
            ));
        };
        held.push(turn);
    }
    let turns: Vec<&Turn> = held.iter().map(Bound::get).collect();
    Ok(roots_of(&turns))
}

/// Positions (ascending) of the context items a chat request must leave out (SPEC §17.2):
/// tool messages without their call before them, and assistant messages with calls whose
/// results are missing while later messages follow (with the results they did get).
/// Items other than `TurnItem` (the summary) neither make nor answer calls.
#[pyfunction]
pub fn unsendable(items: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
    let py = items.py();
    // The common case, a context of turns none of which is a tool turn or makes a call, is
    // answered in one pass over the tuple without holding or allocating per item.
    if let Ok(tuple) = items.cast::<PyTuple>() {
        let links = tuple.iter_borrowed().any(|item| {
            item.cast::<TurnItem>()
                .is_ok_and(|item| may_link(item.get().turn()))
        });
        if !links {
            return Ok(PyList::empty(py).unbind());
        }
    }
    let mut held: Vec<Option<Bound<'_, TurnItem>>> = Vec::new();
    for item in items.try_iter()? {
        held.push(item?.cast_into::<TurnItem>().ok());
    }
    let parsed: Vec<Option<Vec<String>>> = held
        .iter()
        .map(|item| {
            let turn = item.as_ref()?.get().turn();
            if turn.role != Role::Assistant {
                return None;
            }
            // Text that is not a list of calls is the adapter's error to raise; here it
            // makes no call. An empty list makes none either.
            tool_call_ids(meta_value(turn.meta_slice(), "tool_calls")?)
                .filter(|ids| !ids.is_empty())
        })
        .collect();
    let chat_items: Vec<ChatItem<'_>> = held
        .iter()
        .zip(&parsed)
        .map(|(item, calls)| {
            let Some(item) = item else {
                return ChatItem::Plain;
            };
            let turn = item.get().turn();
            match (turn.role, calls) {
                (Role::Assistant, Some(calls)) => {
                    ChatItem::Calls(calls.iter().map(String::as_str).collect())
                }
                (Role::Tool, _) => ChatItem::Answer(meta_value(turn.meta_slice(), "tool_call_id")),
                _ => ChatItem::Plain,
            }
        })
        .collect();
    Ok(PyList::new(py, chat::unsendable(&chat_items))?.unbind())
}

/// Whether a turn can make or answer a call: a tool turn, or an assistant turn with meta.
fn may_link(turn: &Turn) -> bool {
    match turn.role {
        Role::Tool => true,
        Role::Assistant => turn.meta.is_some(),
        _ => false,
    }
}
