//! Batch revalidation from stored rows: extract while attached (bodies borrowed, not
//! copied), then hash and check detached from the interpreter on a rayon pool.

use std::collections::HashMap;
use std::sync::Arc;

use ledgerfold_core::columns::{self, CurrentSummary};
use ledgerfold_core::revalidate::{
    revalidate_each_on, ConversationRows, Totals, TurnRow, Verdict, UNREADABLE_ROLE,
};
use ledgerfold_core::{Exec, Problem};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyIterator, PyString, PyTuple};

use crate::errors::invalid;
use crate::extract;

enum Body {
    Bytes(Py<PyBytes>),
    Text(Py<PyString>),
    Unreadable,
}

/// A stored text field: `str`, or `bytes` holding its UTF-8 (what reading a column as a blob
/// gives, whatever its storage class; bytes that are not UTF-8 are not text).
enum Text {
    Str(Py<PyString>),
    Bytes(Py<PyBytes>),
}

impl Text {
    fn read<'a>(&'a self, py: Python<'_>) -> Option<&'a str> {
        match self {
            Text::Str(text) => text.to_str(py).ok(),
            Text::Bytes(bytes) => std::str::from_utf8(bytes.as_bytes(py)).ok(),
        }
    }
}

struct OwnedRow {
    /// False when a turn field was of the wrong type: the row is then an invalid turn.
    readable: bool,
    id: Text,
    sequence: i64,
    role: Option<Text>,
    body: Body,
    protected: bool,
    protection_reason: Option<Text>,
    group: Option<Text>,
    meta: Option<Text>,
}

fn items<'py>(field: &'static str, value: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let iterator = PyIterator::from_object(value)
        .map_err(|_| extract::wrong_type(field, "a sequence", value))?;
    iterator.collect()
}

fn text(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Py<PyString>> {
    Ok(extract::string(field, value)?.clone().unbind())
}

/// A text field as `str` or as `bytes` (checked for UTF-8 when read).
fn text_or_bytes(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Text> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Text::Bytes(bytes.clone().unbind()));
    }
    text(field, value).map(Text::Str)
}

fn optional_text(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Option<Text>> {
    if value.is_none() {
        return Ok(None);
    }
    text_or_bytes(field, value).map(Some)
}

pub(crate) fn tuple_of<'py>(
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

/// A stored turn ID, or a summary's source ID, that is not UTF-8 text: damage in storage, read
/// as an ID no valid turn has (empty), so its row is an invalid turn and such a source cites
/// none of the valid ones: a verdict, not an error.
const UNREADABLE_ID: &str = "";

/// A turn field read leniently: one of the wrong type (or text that is not UTF-8) makes its
/// row an invalid turn, as any stored row that no longer is one; damage in storage is a
/// verdict (`source-modified`), not an error. Only the keys (conversation and turn ID) must
/// be well-typed.
fn lenient<T>(readable: &mut bool, value: PyResult<T>) -> Option<T> {
    value.map_err(|_| *readable = false).ok()
}

/// The eight turn fields of a row tuple, starting at `at`.
fn owned_row_fields(row: &Bound<'_, PyTuple>, at: usize) -> PyResult<OwnedRow> {
    let mut readable = true;
    let body = row.get_item(at + 3)?;
    let body = if let Ok(bytes) = body.cast::<PyBytes>() {
        Body::Bytes(bytes.clone().unbind())
    } else {
        lenient(&mut readable, text("body", &body)).map_or(Body::Unreadable, Body::Text)
    };
    let sequence = lenient(
        &mut readable,
        extract::int64("sequence", &row.get_item(at + 1)?),
    );
    let role = lenient(&mut readable, text_or_bytes("role", &row.get_item(at + 2)?));
    let protected = row.get_item(at + 4)?;
    let protected = if protected.is_instance_of::<PyInt>() {
        protected.is_truthy()?
    } else {
        readable = false;
        false
    };
    let protection_reason = lenient(
        &mut readable,
        optional_text("protection_reason", &row.get_item(at + 5)?),
    );
    let group = lenient(
        &mut readable,
        optional_text("group", &row.get_item(at + 6)?),
    );
    let meta = lenient(&mut readable, optional_text("meta", &row.get_item(at + 7)?));
    Ok(OwnedRow {
        readable,
        // Text that is not UTF-8 is damage, read as `UNREADABLE_ID` (`borrowed_row`).
        id: text_or_bytes("id", &row.get_item(at)?)?,
        sequence: sequence.unwrap_or(-1),
        role,
        body,
        protected,
        protection_reason: protection_reason.flatten(),
        group: group.flatten(),
        meta: meta.flatten(),
    })
}

fn borrowed_row<'a>(py: Python<'_>, row: &'a OwnedRow) -> PyResult<TurnRow<'a>> {
    // `Some(None)` for NULL, `None` for bytes that are not UTF-8.
    let read = |value: &'a Option<Text>| match value {
        None => Some(None),
        Some(text) => text.read(py).map(Some),
    };
    let role = row.role.as_ref().and_then(|role| role.read(py));
    let (reason, group, meta) = (
        read(&row.protection_reason),
        read(&row.group),
        read(&row.meta),
    );
    let id = row.id.read(py);
    let readable = row.readable
        && id.is_some()
        && role.is_some()
        && reason.is_some()
        && group.is_some()
        && meta.is_some();
    Ok(TurnRow {
        id: id.unwrap_or(UNREADABLE_ID),
        sequence: row.sequence,
        role: match role {
            Some(role) if readable => role,
            _ => UNREADABLE_ROLE,
        },
        body: match &row.body {
            Body::Bytes(bytes) => bytes.as_bytes(py),
            Body::Text(text) => text.to_str(py)?.as_bytes(),
            Body::Unreadable => &[],
        },
        protected: row.protected,
        protection_reason: reason.flatten(),
        group: group.flatten(),
        meta_json: meta.flatten(),
    })
}

thread_local! {
    /// Each calling thread's pools by (process, size), so two interpreter threads checking
    /// at once each hash on their own threads (a shared one-thread pool would take their
    /// work in turn). A forked child must not use or drop its parent's pools, whose threads
    /// do not exist in the child: those are forgotten.
    static POOLS: std::cell::RefCell<Vec<(u32, usize, Arc<rayon::ThreadPool>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn pool(py: Python<'_>, threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let process = std::process::id();
    POOLS.with_borrow_mut(|pools| {
        if pools.iter().any(|(owner, _, _)| *owner != process) {
            let (mine, inherited) = std::mem::take(pools)
                .into_iter()
                .partition(|(owner, _, _)| *owner == process);
            std::mem::forget::<Vec<_>>(inherited);
            *pools = mine;
        }
        if let Some((_, _, pool)) = pools.iter().find(|(_, size, _)| *size == threads) {
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
    })
}

/// Runs `work` detached from the interpreter: with one thread, inline on the calling thread
/// (no pool, so no thread hand-off a batch); with more, on this thread's pool of that size.
pub(crate) fn on_threads<R: Send>(
    py: Python<'_>,
    threads: usize,
    work: impl FnOnce(Exec) -> R + Send,
) -> PyResult<R> {
    if threads == 1 {
        return Ok(py.detach(|| work(Exec::Inline)));
    }
    let pool = pool(py, threads)?;
    Ok(py.detach(|| pool.install(|| work(Exec::Pool))))
}

pub(crate) fn thread_count(py: Python<'_>, threads: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
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

pub(crate) struct FlatSummary {
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
/// conversation (the current one). Text may come as `str` or UTF-8 `bytes`. Rows of
/// conversations without a summary here are ignored, as are rows whose conversation key is
/// `bytes` that are not UTF-8 (no summary's can be); a turn field of the wrong type makes
/// its row an invalid turn (only the keys must be well-typed), as a stored row that no
/// longer is a turn always is. Every cited body is re-hashed; stored digests are never
/// read. Returns one `(conversation_id, summary_id, reason | None, turn_id | None)` per
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
) -> PyResult<Report> {
    let threads = thread_count(py, threads)?;
    let owned_rows: Vec<(Text, OwnedRow)> = items("rows", rows)?
        .iter()
        .map(|row| {
            let row = tuple_of("rows", row, 9)?;
            Ok((
                text_or_bytes("conversation_id", &row.get_item(0)?)?,
                owned_row_fields(&row, 1)?,
            ))
        })
        .collect::<PyResult<_>>()?;
    let owned_sources: Vec<(i64, Text)> = items("sources", sources)?
        .iter()
        .map(|source| {
            let source = tuple_of("sources", source, 2)?;
            Ok((
                extract::int64("summary_pk", &source.get_item(0)?)?,
                text_or_bytes("turn_id", &source.get_item(1)?)?,
            ))
        })
        .collect::<PyResult<_>>()?;
    let owned_summaries = flat_summaries(summaries)?;

    // A row whose conversation key is not UTF-8 text (damage in storage) belongs to none of
    // the summaries, whose keys are `str`: left out, as rows of other conversations are.
    let rows = owned_rows
        .iter()
        .filter_map(|(conversation, row)| {
            let conversation = conversation.read(py)?;
            Some(borrowed_row(py, row).map(|row| (conversation, row)))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let mut sources: HashMap<i64, Vec<&str>> = HashMap::new();
    for (pk, turn_id) in &owned_sources {
        sources
            .entry(*pk)
            .or_default()
            .push(turn_id.read(py).unwrap_or(UNREADABLE_ID));
    }
    let current = current_summaries(py, &owned_summaries)?;
    let conversations = columns::group(rows, sources, &current);
    let per_conversation =
        on_threads(py, threads, |exec| revalidate_each_on(&conversations, exec))?;
    verdicts(
        py,
        &owned_summaries,
        &conversations,
        per_conversation,
        per_summary,
        None,
    )
}

pub(crate) fn current_summaries<'a>(
    py: Python<'_>,
    summaries: &'a [FlatSummary],
) -> PyResult<Vec<CurrentSummary<'a>>> {
    summaries
        .iter()
        .map(|summary| {
            Ok(CurrentSummary {
                conversation_id: summary.conversation.to_str(py)?,
                summary_pk: summary.pk,
                summary_id: summary.id.to_str(py)?,
                source_fingerprint: summary.fingerprint.to_str(py)?,
            })
        })
        .collect()
}

pub(crate) fn flat_summaries(summaries: &Bound<'_, PyAny>) -> PyResult<Vec<FlatSummary>> {
    items("summaries", summaries)?
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
        .collect()
}

pub(crate) type Checked = Vec<(Vec<Verdict>, Totals)>;

/// `(verdicts, turns_hashed, bytes_hashed)`.
pub(crate) type Report = (Vec<Py<PyTuple>>, u64, u64);

/// `(verdicts, turns_hashed, bytes_hashed)`: one `(conversation_id, summary_id, reason |
/// None, turn_id | None)` per summary, in input order (with `per_summary`, plus the turns
/// and bytes hashed for that summary's conversation).
pub(crate) fn verdicts(
    py: Python<'_>,
    summaries: &[FlatSummary],
    conversations: &[ConversationRows<'_>],
    per_conversation: Checked,
    per_summary: bool,
    uncited: Option<&[Option<Vec<i64>>]>,
) -> PyResult<Report> {
    let (mut turns_hashed, mut bytes_hashed) = (0u64, 0u64);
    let mut out = Vec::with_capacity(summaries.len());
    for (found, totals) in per_conversation {
        turns_hashed += totals.turns_hashed;
        bytes_hashed += totals.bytes_hashed;
        for verdict in found {
            let summary = &summaries[verdict.conversation];
            let rows = &conversations[verdict.conversation].summaries[verdict.summary];
            let turn_id = verdict
                .source_index
                .map(|index| PyString::new(py, rows.source_ids[index]));
            let reason = verdict
                .reason
                .map(ledgerfold_core::check::CheckReason::as_str);
            let item = if let Some(uncited) = uncited {
                (
                    summary.conversation.bind(py),
                    summary.id.bind(py),
                    reason,
                    turn_id,
                    uncited[verdict.conversation].clone(),
                )
                    .into_pyobject(py)?
            } else if per_summary {
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
