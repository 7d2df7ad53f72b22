//! Compaction planning (SPEC §4) and the ordered-ID comparison that goes with it.

use std::collections::HashSet;

use ledgerfold_core::ids;
use ledgerfold_core::plan::{plan_layout, PlanInput};
use ledgerfold_core::Problem;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::conversation::Conversation;
use crate::errors::invalid;
use crate::extract;
use crate::source_ids::SourceIds;

/// True when `ids` begins with `prefix` (each a tuple or a `SourceIds`). An item that is
/// the very object of the prefix is equal without comparing text, and IDs a `SourceIds`
/// shares with its prefix's storage are equal without looking at them, so a rolling
/// envelope built on its parent's IDs is checked without comparing every covered ID.
#[pyfunction]
pub fn starts_with_ids(ids: &Bound<'_, PyAny>, prefix: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(shared) = ids.cast::<SourceIds>() {
        return shared.get().starts_with(ids.py(), prefix);
    }
    let ids = ids
        .cast::<PyTuple>()
        .map_err(|_| extract::wrong_type("ids", "a tuple or a SourceIds", ids))?;
    if let Ok(shared) = prefix.cast::<SourceIds>() {
        let prefix = shared.get().tuple(ids.py())?;
        return tuple_starts_with(ids, &prefix);
    }
    let prefix = prefix
        .cast::<PyTuple>()
        .map_err(|_| extract::wrong_type("prefix", "a tuple or a SourceIds", prefix))?;
    tuple_starts_with(ids, prefix)
}

fn tuple_starts_with(ids: &Bound<'_, PyTuple>, prefix: &Bound<'_, PyTuple>) -> PyResult<bool> {
    if prefix.len() > ids.len() {
        return Ok(false);
    }
    for (index, expected) in prefix.iter_borrowed().enumerate() {
        let item = ids.get_borrowed_item(index)?;
        if item.as_ptr() != expected.as_ptr() && !item.eq(&*expected)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// True when both have the same length and the same ID at every position.
#[pyfunction]
pub fn same_ordered_ids(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    let a = extract::string_items("a", a)?;
    let b = extract::string_items("b", b)?;
    Ok(ids::same_ordered_ids(
        &extract::as_strs(&a)?,
        &extract::as_strs(&b)?,
    ))
}

/// `(compacted_ids, preserved_ids, through_sequence)` of SPEC §4; the turns named in
/// `pinned` (preserved roles, open tool calls: SPEC §15.3) stay raw like protected ones,
/// and each turn's compaction unit (SPEC §17.2) is compacted whole or not at all.
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
        .map(|ids| extract::string_items("pinned", ids))
        .transpose()?;
    let pinned: HashSet<&str> = match &pinned {
        Some(ids) => ids.iter().map(|id| id.to_str()).collect::<PyResult<_>>()?,
        None => HashSet::new(),
    };
    let conversation = conversation.get();
    let roots = conversation.units().roots();
    let inputs: Vec<PlanInput> = conversation
        .turns
        .iter()
        .zip(roots)
        .map(|(turn, unit)| {
            let turn = turn.get();
            PlanInput {
                protected: turn.protected || (!pinned.is_empty() && pinned.contains(&*turn.id)),
                unit,
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
