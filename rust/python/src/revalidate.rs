//! Batch revalidation from stored rows: extract while attached (bodies borrowed, not
//! copied), then hash and check detached from the interpreter on a rayon pool.

use std::sync::{Arc, Mutex};

use ledgerfold_core::revalidate::{revalidate_many, ConversationRows, SummaryRow, TurnRow};
use ledgerfold_core::Problem;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyIterator, PyString, PyTuple};

use crate::errors::invalid;
use crate::extract;

enum Body {
    Bytes(Py<PyBytes>),
    Text(Py<PyString>),
}

struct OwnedRow {
    id: Py<PyString>,
    sequence: i64,
    role: Py<PyString>,
    body: Body,
    protected: bool,
    protection_reason: Option<Py<PyString>>,
    group: Option<Py<PyString>>,
    meta: Option<Py<PyString>>,
}

struct OwnedSummary {
    id: Py<PyString>,
    sources: Vec<Py<PyString>>,
    fingerprint: Py<PyString>,
}

struct OwnedConversation {
    id: Py<PyString>,
    rows: Vec<OwnedRow>,
    summaries: Vec<OwnedSummary>,
}

fn items<'py>(field: &'static str, value: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let iterator = PyIterator::from_object(value)
        .map_err(|_| extract::wrong_type(field, "a sequence", value))?;
    iterator.collect()
}

fn text(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Py<PyString>> {
    Ok(extract::string(field, value)?.clone().unbind())
}

fn optional_text(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyString>>> {
    if value.is_none() {
        return Ok(None);
    }
    text(field, value).map(Some)
}

fn tuple_of<'py>(
    field: &'static str,
    value: &Bound<'py, PyAny>,
    len: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let tuple = value
        .cast::<PyTuple>()
        .map_err(|_| extract::wrong_type(field, "a tuple", value))?;
    if tuple.len() != len {
        return Err(invalid(
            value.py(),
            field,
            Problem::WrongType,
            format!("must have {len} items"),
        ));
    }
    Ok(tuple.clone())
}

fn owned_row(row: &Bound<'_, PyAny>) -> PyResult<OwnedRow> {
    let row = tuple_of("rows", row, 8)?;
    let body = row.get_item(3)?;
    let body = if let Ok(bytes) = body.cast::<PyBytes>() {
        Body::Bytes(bytes.clone().unbind())
    } else {
        Body::Text(text("body", &body)?)
    };
    let protected = row.get_item(4)?;
    Ok(OwnedRow {
        id: text("id", &row.get_item(0)?)?,
        sequence: extract::int64("sequence", &row.get_item(1)?)?,
        role: text("role", &row.get_item(2)?)?,
        body,
        protected: protected.is_truthy()?,
        protection_reason: optional_text("protection_reason", &row.get_item(5)?)?,
        group: optional_text("group", &row.get_item(6)?)?,
        meta: optional_text("meta", &row.get_item(7)?)?,
    })
}

fn owned_conversation(value: &Bound<'_, PyAny>) -> PyResult<OwnedConversation> {
    let conversation = tuple_of("conversations", value, 3)?;
    let rows = items("rows", &conversation.get_item(1)?)?
        .iter()
        .map(owned_row)
        .collect::<PyResult<_>>()?;
    let summaries = items("summaries", &conversation.get_item(2)?)?
        .iter()
        .map(|summary| {
            let summary = tuple_of("summaries", summary, 3)?;
            Ok(OwnedSummary {
                id: text("summary_id", &summary.get_item(0)?)?,
                sources: items("source_ids", &summary.get_item(1)?)?
                    .iter()
                    .map(|id| text("source_ids", id))
                    .collect::<PyResult<_>>()?,
                fingerprint: text("source_fingerprint", &summary.get_item(2)?)?,
            })
        })
        .collect::<PyResult<_>>()?;
    Ok(OwnedConversation {
        id: text("conversation_id", &conversation.get_item(0)?)?,
        rows,
        summaries,
    })
}

fn borrowed<'a>(
    py: Python<'_>,
    conversation: &'a OwnedConversation,
) -> PyResult<ConversationRows<'a>> {
    let opt =
        |value: &'a Option<Py<PyString>>| value.as_ref().map(|text| text.to_str(py)).transpose();
    let turns = conversation
        .rows
        .iter()
        .map(|row| {
            Ok(TurnRow {
                id: row.id.to_str(py)?,
                sequence: row.sequence,
                role: row.role.to_str(py)?,
                body: match &row.body {
                    Body::Bytes(bytes) => bytes.as_bytes(py),
                    Body::Text(text) => text.to_str(py)?.as_bytes(),
                },
                protected: row.protected,
                protection_reason: opt(&row.protection_reason)?,
                group: opt(&row.group)?,
                meta_json: opt(&row.meta)?,
            })
        })
        .collect::<PyResult<_>>()?;
    let summaries = conversation
        .summaries
        .iter()
        .map(|summary| {
            Ok(SummaryRow {
                summary_id: summary.id.to_str(py)?,
                source_ids: summary
                    .sources
                    .iter()
                    .map(|id| id.to_str(py))
                    .collect::<PyResult<_>>()?,
                source_fingerprint: summary.fingerprint.to_str(py)?,
            })
        })
        .collect::<PyResult<_>>()?;
    Ok(ConversationRows {
        conversation_id: conversation.id.to_str(py)?,
        turns,
        summaries,
    })
}

static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());

fn pool(py: Python<'_>, threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let mut pools = POOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, pool)) = pools.iter().find(|(size, _)| *size == threads) {
        return Ok(pool.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|index| format!("ledgerfold-revalidate-{index}"))
        .build()
        .map_err(|err| {
            invalid(
                py,
                "threads",
                Problem::OutOfRange,
                format!("cannot start threads: {err}"),
            )
        })?;
    let pool = Arc::new(pool);
    pools.push((threads, pool.clone()));
    Ok(pool)
}

type VerdictTuple = (
    Py<PyString>,
    Py<PyString>,
    Option<&'static str>,
    Option<Py<PyString>>,
);

/// Deep revalidation of stored rows. `conversations` is a sequence of
/// `(conversation_id, rows, summaries)` with rows
/// `(id, sequence, role, body: bytes | str, protected, protection_reason, group, meta_json)`
/// and summaries `(summary_id, source_ids, source_fingerprint)`. Every cited body is
/// re-hashed; stored digests are never read. Returns one
/// `(conversation_id, summary_id, reason | None, turn_id | None)` per summary, in input
/// order, plus `(turns_hashed, bytes_hashed)`.
#[pyfunction]
#[pyo3(signature = (conversations, threads=None))]
pub fn revalidate_rows(
    py: Python<'_>,
    conversations: &Bound<'_, PyAny>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<VerdictTuple>, u64, u64)> {
    let threads = match threads.filter(|value| !value.is_none()) {
        Some(value) => {
            let count = extract::int64("threads", value)?;
            if !(1..=1024).contains(&count) {
                return Err(invalid(
                    py,
                    "threads",
                    Problem::OutOfRange,
                    "must be between 1 and 1024",
                ));
            }
            usize::try_from(count).unwrap_or(1)
        }
        None => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
    };
    let owned: Vec<OwnedConversation> = items("conversations", conversations)?
        .iter()
        .map(owned_conversation)
        .collect::<PyResult<_>>()?;
    let rows: Vec<ConversationRows<'_>> = owned
        .iter()
        .map(|c| borrowed(py, c))
        .collect::<PyResult<_>>()?;
    let pool = pool(py, threads)?;
    let (verdicts, totals) = py.detach(|| pool.install(|| revalidate_many(&rows)));
    let out = verdicts
        .into_iter()
        .map(|verdict| {
            let conversation = &owned[verdict.conversation];
            let summary = &conversation.summaries[verdict.summary];
            (
                conversation.id.clone_ref(py),
                summary.id.clone_ref(py),
                verdict
                    .reason
                    .map(ledgerfold_core::check::CheckReason::as_str),
                verdict
                    .source_index
                    .map(|index| summary.sources[index].clone_ref(py)),
            )
        })
        .collect();
    Ok((out, totals.turns_hashed, totals.bytes_hashed))
}
