//! Context assembly (SPEC §8): which ledger turns go raw and where the summary goes.

use ledgerfold_core::assemble::layout;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::check::SummaryFields;
use crate::conversation::Conversation;
use crate::extract;
use crate::items::TurnItem;

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
        .map(|ids| extract::string_items("preserved_ids", ids))
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
