//! List fingerprints of SPEC §3 over the turns' cached digests.

use std::collections::HashMap;

use ledgerfold_core::fingerprint::to_fingerprint_string;
use ledgerfold_core::{CoreError, ExtendableFingerprint, Fingerprinter};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::conversation::{collect_turns, Conversation};
use crate::errors::to_py_err;
use crate::extract;
use crate::turn::Turn;

/// The fingerprint of `items`, each of which must be a `Turn`.
fn fingerprint_items<'py>(
    items: impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
) -> PyResult<String> {
    let mut fingerprint = Fingerprinter::new(items.len());
    for item in items {
        let turn = item
            .cast::<Turn>()
            .map_err(|_| extract::wrong_type("turns", "an iterable of Turn", &item))?;
        fingerprint.push(&turn.get().digest);
    }
    Ok(fingerprint.finish_hex())
}

/// `lf1:` fingerprint over the turns' cached digests, in the order given.
#[pyfunction]
pub fn fingerprint_turns(py: Python<'_>, turns: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(conversation) = turns.cast::<Conversation>() {
        let digests = &conversation.get().digests;
        return Ok(ledgerfold_core::fingerprint_hex(digests.iter()));
    }
    // Lists and tuples are read in place; anything else is collected first, as the count
    // is hashed before the digests.
    if let Ok(list) = turns.cast::<PyList>() {
        return fingerprint_items(list.iter());
    }
    if let Ok(tuple) = turns.cast::<PyTuple>() {
        return fingerprint_items(tuple.iter());
    }
    let turns = collect_turns(py, "turns", turns)?;
    fingerprint_items(turns.into_iter().map(|turn| turn.into_bound(py).into_any()))
}

/// Fingerprint over the turns with these IDs in sequence order; `None` if any is missing.
#[pyfunction]
pub fn source_fingerprint(
    py: Python<'_>,
    source_ids: &Bound<'_, PyAny>,
    turns: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    let source_ids = extract::string_items("source_ids", source_ids)?;
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

/// `lf1:` fingerprint over turn digests given back to back (32 bytes each), e.g. the stored
/// digests of a summary's sources, followed by those in `more` (the turns it adds): two
/// buffers, so that the caller need not copy the first to append the second.
#[pyfunction]
#[pyo3(signature = (digests, more=None))]
pub fn fingerprint_digests(
    py: Python<'_>,
    digests: &[u8],
    more: Option<&[u8]>,
) -> PyResult<String> {
    let more = more.unwrap_or_default();
    for (field, buffer) in [("digests", digests), ("more", more)] {
        if buffer.len() % 32 != 0 {
            return Err(crate::errors::invalid(
                py,
                field,
                ledgerfold_core::Problem::OutOfRange,
                "must be 32 bytes per digest",
            ));
        }
    }
    let mut fingerprint = Fingerprinter::new((digests.len() + more.len()) / 32);
    fingerprint.push_packed(digests);
    fingerprint.push_packed(more);
    Ok(fingerprint.finish_hex())
}

/// The bytes of a packed-digests argument (None: none); `InvalidInput` naming `field` when
/// it is not `bytes`.
fn packed<'a>(field: &'static str, value: Option<&'a Bound<'_, PyAny>>) -> PyResult<&'a [u8]> {
    match value {
        None => Ok(&[]),
        Some(value) => value
            .cast::<PyBytes>()
            .map(PyBytesMethods::as_bytes)
            .map_err(|_| crate::extract::wrong_type(field, "bytes", value)),
    }
}

fn check_packed(py: Python<'_>, field: &'static str, buffer: &[u8]) -> PyResult<()> {
    if buffer.len() % 32 == 0 {
        return Ok(());
    }
    Err(crate::errors::invalid(
        py,
        field,
        ledgerfold_core::Problem::OutOfRange,
        "must be 32 bytes per digest",
    ))
}

/// The fingerprint state of a summary's source digests (SPEC §15.1): the fingerprint of
/// these digests followed by more costs O(more + log count), not O(count), so a rolling
/// summary over 100k turns is fingerprinted without hashing 3.2 MB again. Immutable:
/// `extended` returns a new state (O(log count) bytes are copied, not the digests).
#[pyclass(frozen, module = "ledgerfold._native", name = "SourceDigests")]
pub struct SourceDigests {
    state: ExtendableFingerprint,
}

#[pymethods]
impl SourceDigests {
    /// The state of digests given back to back (32 bytes each, source order).
    #[new]
    #[pyo3(signature = (digests=None))]
    fn new(py: Python<'_>, digests: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let digests = packed("digests", digests)?;
        check_packed(py, "digests", digests)?;
        let state = py.detach(|| ExtendableFingerprint::new(digests));
        Ok(SourceDigests { state })
    }

    /// `lf1:` fingerprint of the held digests followed by `more` (32 bytes each).
    #[pyo3(signature = (more=None))]
    fn fingerprint(&self, py: Python<'_>, more: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
        let more = packed("more", more)?;
        check_packed(py, "more", more)?;
        Ok(to_fingerprint_string(&self.state.fingerprint(more)))
    }

    /// A new state holding these digests followed by `more` (32 bytes each).
    fn extended(&self, py: Python<'_>, more: &Bound<'_, PyAny>) -> PyResult<Self> {
        let more = packed("more", Some(more))?;
        check_packed(py, "more", more)?;
        let mut state = self.state.clone();
        state.extend(more);
        Ok(SourceDigests { state })
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.state.count()).unwrap_or(usize::MAX)
    }

    fn __repr__(&self) -> String {
        format!("SourceDigests(count={})", self.state.count())
    }
}
