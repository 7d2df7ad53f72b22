//! `SourceIds`: a summary's source IDs as a frozen sequence of `str` that shares its parent's
//! storage (`ledgerfold_core::shared_seq`), so a rolling summary's IDs cost O(new turns),
//! not O(covered turns) (issue 28 item 6). It behaves as the tuple of its IDs would: equal
//! to that tuple (and hashing as it does), indexable, sliceable (a slice is a tuple),
//! iterable, concatenable with tuples, picklable.

use std::sync::OnceLock;

use ledgerfold_core::shared_seq::SharedSeq;
use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PySlice, PyString, PyTuple};

type Ids = SharedSeq<Py<PyString>>;

/// An immutable sequence of source IDs; `a + b` shares `a`'s storage.
#[pyclass(frozen, sequence, module = "ledgerfold._native", name = "SourceIds")]
pub struct SourceIds {
    ids: Ids,
    hash: OnceLock<isize>,
}

impl SourceIds {
    fn of(ids: Ids) -> Self {
        SourceIds {
            ids,
            hash: OnceLock::new(),
        }
    }

    pub fn tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple_of(py, &self.ids)
    }
}

fn tuple_of<'py>(py: Python<'py>, ids: &Ids) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, ids.iter().map(|id| id.bind(py)).collect::<Vec<_>>())
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |name| name.to_string())
}

/// The `str`s of `value` (any iterable but a lone `str`); `TypeError` otherwise.
fn strings(value: &Bound<'_, PyAny>) -> PyResult<Vec<Py<PyString>>> {
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "SourceIds: expected an iterable of str, got a str",
        ));
    }
    if let Ok(other) = value.cast::<SourceIds>() {
        let py = value.py();
        return Ok(other.get().ids.iter().map(|id| id.clone_ref(py)).collect());
    }
    let iterator = PyIterator::from_object(value).map_err(|_| {
        PyTypeError::new_err(format!(
            "SourceIds: expected an iterable of str, got {}",
            type_name(value)
        ))
    })?;
    let mut out = Vec::with_capacity(value.len().unwrap_or(0));
    for item in iterator {
        let item = item?;
        let id = item.cast_into::<PyString>().map_err(|err| {
            PyTypeError::new_err(format!(
                "SourceIds: every ID must be a str, got {}",
                type_name(err.into_inner().as_any())
            ))
        })?;
        out.push(id.unbind());
    }
    Ok(out)
}

/// IDs are equal when they are the same object or equal strings.
fn same(py: Python<'_>, a: &Py<PyString>, b: &Bound<'_, PyAny>) -> bool {
    a.as_ptr() == b.as_ptr() || a.bind(py).as_any().eq(b).unwrap_or(false)
}

/// The other operand of `==`/`+` as IDs: a `SourceIds` (shared) or a tuple (not a list:
/// a tuple is not equal to a list either).
enum Operand<'a, 'py> {
    Ids(&'a Ids),
    Tuple(Bound<'py, PyTuple>),
}

fn operand<'a, 'py>(other: &'a Bound<'py, PyAny>) -> Option<Operand<'a, 'py>> {
    if let Ok(ids) = other.cast::<SourceIds>() {
        return Some(Operand::Ids(&ids.get().ids));
    }
    other
        .cast::<PyTuple>()
        .ok()
        .map(|tuple| Operand::Tuple(tuple.clone()))
}

impl SourceIds {
    fn starts_with_operand(&self, py: Python<'_>, prefix: &Operand<'_, '_>) -> bool {
        match prefix {
            Operand::Ids(prefix) => self
                .ids
                .starts_with(prefix, |a, b| same(py, a, b.bind(py).as_any())),
            Operand::Tuple(prefix) => {
                prefix.len() <= self.ids.len()
                    && self
                        .ids
                        .iter()
                        .zip(prefix.iter_borrowed())
                        .all(|(a, b)| same(py, a, &b))
            }
        }
    }

    fn equals_operand(&self, py: Python<'_>, other: &Operand<'_, '_>) -> bool {
        let len = match other {
            Operand::Ids(ids) => ids.len(),
            Operand::Tuple(tuple) => tuple.len(),
        };
        len == self.ids.len() && self.starts_with_operand(py, other)
    }
}

/// `index` as a position in `0..len` (negative counts from the end), `IndexError` otherwise.
fn position(index: isize, len: usize) -> PyResult<usize> {
    let len_signed = isize::try_from(len).unwrap_or(isize::MAX);
    let adjusted = if index < 0 { index + len_signed } else { index };
    if (0..len_signed).contains(&adjusted) {
        Ok(adjusted.unsigned_abs())
    } else {
        Err(PyIndexError::new_err("SourceIds index out of range"))
    }
}

#[pymethods]
impl SourceIds {
    /// The IDs of `ids`, an iterable of `str` (`TypeError` otherwise).
    #[new]
    #[pyo3(signature = (ids=None))]
    fn new(ids: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        match ids {
            None => Ok(SourceIds::of(Ids::default())),
            Some(ids) => {
                if let Ok(same) = ids.cast::<SourceIds>() {
                    return Ok(SourceIds::of(same.get().ids.clone()));
                }
                Ok(SourceIds::of(Ids::from_vec(strings(ids)?)))
            }
        }
    }

    /// These IDs followed by `ids`, sharing this sequence's storage: O(len(ids)).
    fn extended(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(SourceIds::of(
            self.ids.extended_with(strings(ids)?, |id| id.clone_ref(py)),
        ))
    }

    /// True when these IDs begin with `prefix` (a `SourceIds` or a tuple); IDs held in
    /// shared storage are equal without comparing them.
    pub fn starts_with(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<bool> {
        match operand(prefix) {
            Some(prefix) => Ok(self.starts_with_operand(py, &prefix)),
            None => Err(PyTypeError::new_err(format!(
                "SourceIds.starts_with: expected SourceIds or tuple, got {}",
                type_name(prefix)
            ))),
        }
    }

    fn __len__(&self) -> usize {
        self.ids.len()
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = index.cast::<PySlice>() {
            let found = slice.indices(isize::try_from(self.ids.len()).unwrap_or(isize::MAX))?;
            let mut items = Vec::with_capacity(found.slicelength);
            let mut at = found.start;
            for _ in 0..found.slicelength {
                if let Some(id) = self.ids.get(at.unsigned_abs()) {
                    items.push(id.bind(py).clone());
                }
                at += found.step;
            }
            return Ok(PyTuple::new(py, items)?.into_any());
        }
        let Ok(index) = index.extract::<isize>() else {
            if index.hasattr("__index__")? {
                return Err(PyIndexError::new_err("SourceIds index out of range"));
            }
            return Err(PyTypeError::new_err(format!(
                "SourceIds indices must be integers or slices, not {}",
                type_name(index)
            )));
        };
        let at = position(index, self.ids.len())?;
        self.ids
            .get(at)
            .map(|id| id.bind(py).clone().into_any())
            .ok_or_else(|| PyIndexError::new_err("SourceIds index out of range"))
    }

    fn __iter__(&self) -> SourceIdsIterator {
        SourceIdsIterator {
            ids: self.ids.clone(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn __contains__(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> bool {
        self.ids.iter().any(|id| same(py, id, value))
    }

    /// The position of the first `value` at or after `start` and before `stop`.
    #[pyo3(signature = (value, start=0, stop=isize::MAX))]
    fn index(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        start: isize,
        stop: isize,
    ) -> PyResult<usize> {
        let len = isize::try_from(self.ids.len()).unwrap_or(isize::MAX);
        let clamp = |at: isize| {
            let at = if at < 0 { at + len } else { at };
            at.clamp(0, len).unsigned_abs()
        };
        let (start, stop) = (clamp(start), clamp(stop));
        self.ids
            .iter_from(start)
            .take(stop.saturating_sub(start))
            .position(|id| same(py, id, value))
            .map(|found| start + found)
            .ok_or_else(|| PyValueError::new_err("SourceIds.index(x): x not in sequence"))
    }

    fn count(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> usize {
        self.ids.iter().filter(|id| same(py, id, value)).count()
    }

    fn __richcmp__<'py>(
        &self,
        py: Python<'py>,
        other: &Bound<'py, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let Some(operand) = operand(other) else {
            return Ok(py.NotImplemented());
        };
        match op {
            CompareOp::Eq => Ok(self
                .equals_operand(py, &operand)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind()),
            CompareOp::Ne => Ok((!self.equals_operand(py, &operand))
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind()),
            // Ordering as the tuples order (rare: compared as tuples).
            _ => {
                let other = match operand {
                    Operand::Ids(ids) => tuple_of(py, ids)?,
                    Operand::Tuple(tuple) => tuple,
                };
                Ok(self.tuple(py)?.rich_compare(other, op)?.unbind())
            }
        }
    }

    /// The hash of the tuple of these IDs (they are equal to it), computed once.
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        if let Some(hash) = self.hash.get() {
            return Ok(*hash);
        }
        let hash = self.tuple(py)?.hash()?;
        Ok(*self.hash.get_or_init(|| hash))
    }

    /// `self + other` (a `SourceIds` or a tuple): shares this sequence's storage.
    fn __add__<'py>(&self, py: Python<'py>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        if operand(other).is_none() {
            return Ok(py.NotImplemented());
        }
        Ok(Bound::new(py, self.extended(py, other)?)?
            .into_any()
            .unbind())
    }

    /// `tuple + self`.
    fn __radd__<'py>(&self, py: Python<'py>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        if operand(other).is_none() {
            return Ok(py.NotImplemented());
        }
        let mut joined = strings(other)?;
        joined.extend(self.ids.iter().map(|id| id.clone_ref(py)));
        let joined = Ids::from_vec(joined);
        Ok(Bound::new(py, SourceIds::of(joined))?.into_any().unbind())
    }

    /// `SourceIds(['a', 'b'])`; over six IDs the first three and the last two with the count.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let shown = |ids: &mut dyn Iterator<Item = &Py<PyString>>| -> PyResult<Vec<String>> {
            ids.map(|id| Ok(id.bind(py).repr()?.to_string())).collect()
        };
        let len = self.ids.len();
        if len <= 6 {
            return Ok(format!(
                "SourceIds([{}])",
                shown(&mut self.ids.iter())?.join(", ")
            ));
        }
        let head = shown(&mut self.ids.iter().take(3))?;
        let tail = shown(&mut self.ids.iter_from(len - 2))?;
        Ok(format!(
            "SourceIds([{}, ..., {}], len={len})",
            head.join(", "),
            tail.join(", ")
        ))
    }

    /// Pickled as the tuple of its IDs.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyTuple>,))> {
        Ok((slf.get_type().into_any(), (slf.get().tuple(py)?,)))
    }
}

/// Iterates one `SourceIds` (its storage is shared, not copied).
#[pyclass(frozen, module = "ledgerfold._native", name = "SourceIdsIterator")]
pub struct SourceIdsIterator {
    ids: Ids,
    next: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl SourceIdsIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> Option<Py<PyString>> {
        let at = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.ids.get(at).map(|id| id.clone_ref(py))
    }

    fn __length_hint__(&self) -> usize {
        self.ids
            .len()
            .saturating_sub(self.next.load(std::sync::atomic::Ordering::Relaxed))
    }
}
