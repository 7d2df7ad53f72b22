//! Compaction units (SPEC §17.2) and the chat sequence rule, for Python callers.

use ledgerfold_core::chat::{ChatItem, ChatRule};
use ledgerfold_core::model::Role;
use ledgerfold_core::units::{
    answer_makers as core_answer_makers, meta_value, open_call_positions, tool_call_ids,
    UnitMember, UnitTurn, Units,
};
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
    let held = held_turns(py, turns)?;
    let turns: Vec<&Turn> = held.iter().map(Bound::get).collect();
    Ok(roots_of(&turns))
}

/// Positions (ascending) of the assistant turns among `turns` (a `Conversation`, or `Turn`
/// values in sequence order) with a call no tool turn answers (SPEC §15.3): each result
/// answers the nearest call of its ID before it, as the unit rule pairs them.
#[pyfunction]
pub fn open_calls(py: Python<'_>, turns: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(conversation) = turns.cast::<Conversation>() {
        let conversation = conversation.get();
        return Ok(open_call_positions(conversation.linkable().iter().map(
            |&position| unit_turn(position, conversation.turn(position)),
        )));
    }
    let held = held_turns(py, turns)?;
    Ok(open_call_positions(
        held.iter()
            .enumerate()
            .map(|(position, turn)| unit_turn(position, turn.get())),
    ))
}

/// For each of `turns` (`Turn` values in sequence order), the position of the assistant turn
/// whose call it answers (SPEC §17.2's pairing: the nearest call of its `tool_call_id`
/// before it, else the first after it), or None (not a tool turn with a `tool_call_id`, or
/// no turn makes that call).
#[pyfunction]
pub fn answer_makers(py: Python<'_>, turns: &Bound<'_, PyAny>) -> PyResult<Vec<Option<usize>>> {
    let held = held_turns(py, turns)?;
    let turns: Vec<&Turn> = held.iter().map(Bound::get).collect();
    let parsed: Vec<Vec<String>> = turns
        .iter()
        .map(|turn| match turn.role {
            Role::Assistant => meta_value(turn.meta_slice(), "tool_calls")
                .and_then(tool_call_ids)
                .unwrap_or_default(),
            _ => Vec::new(),
        })
        .collect();
    let members: Vec<UnitMember<'_>> = turns
        .iter()
        .zip(&parsed)
        .map(|(turn, calls)| UnitMember {
            group: None,
            calls: calls.iter().map(String::as_str).collect(),
            answers: (turn.role == Role::Tool)
                .then(|| meta_value(turn.meta_slice(), "tool_call_id"))
                .flatten(),
        })
        .collect();
    Ok(core_answer_makers(&members))
}

/// One turn as the unit rule reads it.
fn unit_turn(position: usize, turn: &Turn) -> UnitTurn<'_> {
    (
        position,
        turn.role,
        turn.group.as_deref(),
        turn.meta_slice(),
    )
}

/// The `Turn` values of an iterable (`InvalidInput` naming the first that is not one).
fn held_turns<'py>(py: Python<'py>, turns: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, Turn>>> {
    let mut held: Vec<Bound<'py, Turn>> = Vec::new();
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
    Ok(held)
}

/// Positions (ascending) of the context items a chat request must leave out (SPEC §17.2):
/// tool messages without their call before them, and assistant messages with calls whose
/// results are missing while later messages follow (with the results they did get).
/// Items other than `TurnItem` (the summary) neither make nor answer calls.
#[pyfunction]
pub fn unsendable(items: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
    let py = items.py();
    Ok(PyList::new(py, unsendable_positions(items)?)?.unbind())
}

/// `len(unsendable(items))`, without building the list (`AssembledContext.dropped`).
#[pyfunction]
pub fn unsendable_count(items: &Bound<'_, PyAny>) -> PyResult<usize> {
    Ok(unsendable_positions(items)?.len())
}

/// The positions of the context items chat messages carry, in the order they are sent
/// (SPEC §17.2): the `unsendable` ones left out, and each tool result sent right after its
/// call's message (a result that came after other messages moves up to it). `None`: every
/// item, in context order.
#[pyfunction]
pub fn chat_order(items: &Bound<'_, PyAny>) -> PyResult<Option<Vec<usize>>> {
    Ok(chat_rule(items)?.finish_order())
}

fn unsendable_positions(items: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    Ok(chat_rule(items)?.finish())
}

/// The chat rule fed the items (`TurnItem`s; any other item, the summary, is plain).
fn chat_rule(items: &Bound<'_, PyAny>) -> PyResult<ChatRule> {
    let mut rule = ChatRule::default();
    // A context is a tuple: read it borrowed, no reference counted or held per item.
    if let Ok(tuple) = items.cast::<PyTuple>() {
        for item in tuple.iter_borrowed() {
            let turn = item.cast::<TurnItem>().ok();
            push_turn(&mut rule, turn.as_ref().map(|item| item.get().turn()));
        }
        return Ok(rule);
    }
    for item in items.try_iter()? {
        let item = item?;
        let turn = item.cast::<TurnItem>().ok();
        push_turn(&mut rule, turn.as_ref().map(|item| item.get().turn()));
    }
    Ok(rule)
}

/// Feeds one context item to the chat rule: a tool turn answers its `tool_call_id`, an
/// assistant turn makes the calls its `tool_calls` names (text that is not a list of calls
/// is the adapter's error to raise; here it makes none, as an empty list does); anything
/// else (`None`: the summary) is plain.
pub fn push_turn(rule: &mut ChatRule, turn: Option<&Turn>) {
    let Some(turn) = turn.filter(|turn| may_link(turn)) else {
        rule.push(&ChatItem::Plain);
        return;
    };
    if turn.role == Role::Tool {
        rule.push(&ChatItem::Answer(meta_value(
            turn.meta_slice(),
            "tool_call_id",
        )));
        return;
    }
    match meta_value(turn.meta_slice(), "tool_calls")
        .and_then(tool_call_ids)
        .filter(|ids| !ids.is_empty())
    {
        Some(ids) => rule.push(&ChatItem::Calls(ids.iter().map(String::as_str).collect())),
        None => rule.push(&ChatItem::Plain),
    }
}

/// Whether a turn can make or answer a call: a tool turn, or an assistant turn with meta.
fn may_link(turn: &Turn) -> bool {
    match turn.role {
        Role::Tool => true,
        Role::Assistant => turn.meta.is_some(),
        _ => false,
    }
}
