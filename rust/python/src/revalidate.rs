//! Batch revalidation from stored rows: extract while attached (bodies borrowed, not
//! copied), then hash and check detached from the interpreter on a rayon pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ledgerfold_core::revalidate::{revalidate_each, ConversationRows, SummaryRow, TurnRow};
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

/// The eight turn fields of a row tuple, starting at `at`.
fn owned_row_fields(row: &Bound<'_, PyTuple>, at: usize) -> PyResult<OwnedRow> {
    let body = row.get_item(at + 3)?;
    let body = if let Ok(bytes) = body.cast::<PyBytes>() {
        Body::Bytes(bytes.clone().unbind())
    } else {
        Body::Text(text("body", &body)?)
    };
    Ok(OwnedRow {
        id: text("id", &row.get_item(at)?)?,
        sequence: extract::int64("sequence", &row.get_item(at + 1)?)?,
        role: text("role", &row.get_item(at + 2)?)?,
        body,
        protected: row.get_item(at + 4)?.is_truthy()?,
        protection_reason: optional_text("protection_reason", &row.get_item(at + 5)?)?,
        group: optional_text("group", &row.get_item(at + 6)?)?,
        meta: optional_text("meta", &row.get_item(at + 7)?)?,
    })
}

fn borrowed_row<'a>(py: Python<'_>, row: &'a OwnedRow) -> PyResult<TurnRow<'a>> {
    let opt =
        |value: &'a Option<Py<PyString>>| value.as_ref().map(|text| text.to_str(py)).transpose();
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
}

/// Pools by (process, size): a forked child must not reuse its parent's pools, whose
/// threads do not exist in the child.
static POOLS: Mutex<Vec<(u32, usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());

fn pool(py: Python<'_>, threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let process = std::process::id();
    let mut pools = POOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // A parent's pools stay in the list untouched (dropping one would signal threads that
    // do not exist here).
    if let Some((_, _, pool)) = pools
        .iter()
        .find(|(owner, size, _)| *owner == process && *size == threads)
    {
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
    pools.push((process, threads, pool.clone()));
    Ok(pool)
}

fn thread_count(py: Python<'_>, threads: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    Ok(match threads.filter(|value| !value.is_none()) {
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
    })
}

struct FlatSummary {
    conversation: Py<PyString>,
    pk: i64,
    id: Py<PyString>,
    fingerprint: Py<PyString>,
}

/// Deep revalidation over flat query results, so the caller never loops over rows:
/// `rows` are `(conversation_id, id, sequence, role, body, protected, protection_reason,
/// group, meta_json)` in any order; `sources` are `(summary_pk, turn_id)`, each
/// summary's in source order; `summaries` are
/// `(conversation_id, summary_pk, summary_id, source_fingerprint)`, at most one summary per
/// conversation (the current one). Rows of conversations
/// without a summary here are ignored. Every cited body is re-hashed; stored digests are
/// never read. Returns one `(conversation_id, summary_id, reason | None, turn_id | None)` per
/// summary, in input order, plus `(turns_hashed, bytes_hashed)`; with `per_summary`, each
/// verdict also carries the turns and bytes hashed for that summary's conversation.
#[pyfunction]
#[pyo3(signature = (rows, sources, summaries, threads=None, *, per_summary=false))]
pub fn revalidate_flat(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    sources: &Bound<'_, PyAny>,
    summaries: &Bound<'_, PyAny>,
    threads: Option<&Bound<'_, PyAny>>,
    per_summary: bool,
) -> PyResult<(Vec<Py<PyTuple>>, u64, u64)> {
    let threads = thread_count(py, threads)?;
    let owned_rows: Vec<(Py<PyString>, OwnedRow)> = items("rows", rows)?
        .iter()
        .map(|row| {
            let row = tuple_of("rows", row, 9)?;
            Ok((
                text("conversation_id", &row.get_item(0)?)?,
                owned_row_fields(&row, 1)?,
            ))
        })
        .collect::<PyResult<_>>()?;
    let owned_sources: Vec<(i64, Py<PyString>)> = items("sources", sources)?
        .iter()
        .map(|source| {
            let source = tuple_of("sources", source, 2)?;
            Ok((
                extract::int64("summary_pk", &source.get_item(0)?)?,
                text("turn_id", &source.get_item(1)?)?,
            ))
        })
        .collect::<PyResult<_>>()?;
    let owned_summaries: Vec<FlatSummary> = items("summaries", summaries)?
        .iter()
        .map(|summary| {
            let summary = tuple_of("summaries", summary, 4)?;
            Ok(FlatSummary {
                conversation: text("conversation_id", &summary.get_item(0)?)?,
                pk: extract::int64("summary_pk", &summary.get_item(1)?)?,
                id: text("summary_id", &summary.get_item(2)?)?,
                fingerprint: text("source_fingerprint", &summary.get_item(3)?)?,
            })
        })
        .collect::<PyResult<_>>()?;

    // Group rows by conversation and sources by summary, borrowing every string.
    let mut turns_of: HashMap<&str, Vec<TurnRow<'_>>> = HashMap::new();
    for (conversation, row) in &owned_rows {
        let conversation = conversation.to_str(py)?;
        turns_of
            .entry(conversation)
            .or_default()
            .push(borrowed_row(py, row)?);
    }
    let mut sources_of: HashMap<i64, Vec<&str>> = HashMap::new();
    for (pk, turn_id) in &owned_sources {
        sources_of.entry(*pk).or_default().push(turn_id.to_str(py)?);
    }
    let mut conversations = Vec::with_capacity(owned_summaries.len());
    for summary in &owned_summaries {
        let conversation_id = summary.conversation.to_str(py)?;
        conversations.push(ConversationRows {
            conversation_id,
            // One summary per conversation is the common case: move the rows, else copy.
            turns: turns_of.remove(conversation_id).unwrap_or_default(),
            summaries: vec![SummaryRow {
                summary_id: summary.id.to_str(py)?,
                source_ids: sources_of.remove(&summary.pk).unwrap_or_default(),
                source_fingerprint: summary.fingerprint.to_str(py)?,
            }],
        });
    }
    let pool = pool(py, threads)?;
    let per_conversation = py.detach(|| pool.install(|| revalidate_each(&conversations)));
    let (mut turns_hashed, mut bytes_hashed) = (0u64, 0u64);
    let mut out = Vec::with_capacity(owned_summaries.len());
    for (verdicts, totals) in per_conversation {
        turns_hashed += totals.turns_hashed;
        bytes_hashed += totals.bytes_hashed;
        for verdict in verdicts {
            let summary = &owned_summaries[verdict.conversation];
            let rows = &conversations[verdict.conversation].summaries[verdict.summary];
            let turn_id = verdict
                .source_index
                .map(|index| PyString::new(py, rows.source_ids[index]));
            let reason = verdict
                .reason
                .map(ledgerfold_core::check::CheckReason::as_str);
            let item = if per_summary {
                (
                    summary.conversation.bind(py),
                    summary.id.bind(py),
                    reason,
                    turn_id,
                    totals.turns_hashed,
                    totals.bytes_hashed,
                )
                    .into_pyobject(py)?
            } else {
                (
                    summary.conversation.bind(py),
                    summary.id.bind(py),
                    reason,
                    turn_id,
                )
                    .into_pyobject(py)?
            };
            out.push(item.unbind());
        }
    }
    Ok((out, turns_hashed, bytes_hashed))
}
