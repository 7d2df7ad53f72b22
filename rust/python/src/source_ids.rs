//! `SourceIds`: a summary's source IDs as a frozen sequence of `str` that shares its parent's
//! storage (`ledgerfold_core::shared_seq`), so a rolling summary's IDs cost O(new turns),
//! not O(covered turns) (issue 28 item 6). It behaves as the tuple of its IDs would: equal
//! to that tuple (and hashing as it does), indexable, sliceable (a slice is a tuple),
//! iterable, concatenable with tuples, picklable.

use std::sync::OnceLock;

use ledgerfold_core::shared_seq::SharedSeq;
use ledgerfold_core::Problem;
use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyIterator, PySlice, PyString, PyTuple};

use crate::errors::invalid;
use crate::extract::wrong_type;

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

/// The `str`s of `value` (any iterable but a lone `str`), each encoding as UTF-8;
/// `InvalidInput` naming `field` otherwise (a wrong type, a lone surrogate).
fn strings(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<Vec<Py<PyString>>> {
    if value.is_instance_of::<PyString>() {
        return Err(wrong_type(field, "an iterable of str", value));
    }
    if let Ok(other) = value.cast::<SourceIds>() {
        let py = value.py();
        return Ok(other.get().ids.iter().map(|id| id.clone_ref(py)).collect());
    }
    let iterator = PyIterator::from_object(value)
        .map_err(|_| wrong_type(field, "an iterable of str", value))?;
    let mut out = Vec::with_capacity(crate::extract::capacity_hint(value));
    for item in iterator {
        let item = item?;
        let id = item.cast_into::<PyString>().map_err(|err| {
            invalid(
                value.py(),
                field,
                Problem::WrongType,
                format!(
                    "every ID must be a str, got {}",
                    type_name(err.into_inner().as_any())
                ),
            )
        })?;
        if id.to_str().is_err() {
            return Err(invalid(
                value.py(),
                field,
                Problem::NotUtf8,
                "every ID must encode as UTF-8 (lone surrogates are invalid)",
            ));
        }
        out.push(held(id)?.unbind());
    }
    Ok(out)
}

/// The object a sequence holds for the ID `id`: `id` itself, unless it is of a `str`
/// subclass whose instances have a `__dict__`, which could refer back to the sequence. The
/// garbage collector cannot see into storage that sequences share (no one of them owns a
/// slot's reference), so such a cycle would never be freed; the plain `str` of its text
/// (equal, hashing alike) is held instead. A `str` subclass can have no other references:
/// `CPython` allows it no non-empty `__slots__`.
fn held(id: Bound<'_, PyString>) -> PyResult<Bound<'_, PyString>> {
    if id.is_exact_instance_of::<PyString>() {
        return Ok(id);
    }
    let py = id.py();
    let kind = id.get_type();
    if kind
        .getattr(intern!(py, "__dictoffset__"))?
        .extract::<isize>()?
        == 0
    {
        return Ok(id);
    }
    // `str.__str__` of a subclass instance is an exact `str` copy (lone surrogates kept).
    Ok(py
        .get_type::<PyString>()
        .getattr(intern!(py, "__str__"))?
        .call1((id,))?
        .cast_into::<PyString>()?)
}

/// IDs are equal when they are the same object or compare equal, as a tuple compares its
/// items: an exception raised by a comparison (an `__eq__` of the other value, a
/// `KeyboardInterrupt`) propagates.
fn same(py: Python<'_>, a: &Py<PyString>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    if a.as_ptr() == b.as_ptr() {
        return Ok(true);
    }
    a.bind(py).as_any().eq(b)
}

/// `same` as the infallible predicate `SharedSeq` takes: the first error is kept in `error`
/// and answers false, which ends the comparison.
fn same_or_keep<'a>(
    py: Python<'a>,
    error: &'a mut Option<PyErr>,
) -> impl FnMut(&Py<PyString>, &Py<PyString>) -> bool + 'a {
    move |a, b| match same(py, a, b.bind(py).as_any()) {
        Ok(equal) => equal,
        Err(err) => {
            error.get_or_insert(err);
            false
        }
    }
}

/// The position of the first ID from `ids` equal to `value`, as `same` says.
fn find<'a>(
    py: Python<'_>,
    ids: impl Iterator<Item = &'a Py<PyString>>,
    value: &Bound<'_, PyAny>,
) -> PyResult<Option<usize>> {
    for (at, id) in ids.enumerate() {
        if same(py, id, value)? {
            return Ok(Some(at));
        }
    }
    Ok(None)
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
    fn starts_with_operand(&self, py: Python<'_>, prefix: &Operand<'_, '_>) -> PyResult<bool> {
        match prefix {
            Operand::Ids(prefix) => {
                let mut error = None;
                let found = self.ids.starts_with(prefix, same_or_keep(py, &mut error));
                error.map_or(Ok(found), Err)
            }
            Operand::Tuple(prefix) => {
                if prefix.len() > self.ids.len() {
                    return Ok(false);
                }
                for (a, b) in self.ids.iter().zip(prefix.iter_borrowed()) {
                    if !same(py, a, &b)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    fn equals_operand(&self, py: Python<'_>, other: &Operand<'_, '_>) -> PyResult<bool> {
        let len = match other {
            Operand::Ids(ids) => ids.len(),
            Operand::Tuple(tuple) => tuple.len(),
        };
        Ok(len == self.ids.len() && self.starts_with_operand(py, other)?)
    }
}

/// `operator.index(value)` as an `isize`, or `Err(negative)` when it does not fit one; an
/// `__index__` that raises propagates, a value without one raises `TypeError(message())`.
fn index_of(
    value: &Bound<'_, PyAny>,
    message: impl FnOnce() -> String,
) -> PyResult<Result<isize, bool>> {
    let int = if value.is_instance_of::<PyInt>() {
        value.clone()
    } else if value.hasattr("__index__")? {
        value
            .py()
            .import("operator")?
            .getattr("index")?
            .call1((value,))?
    } else {
        return Err(PyTypeError::new_err(message()));
    };
    match int.extract::<isize>() {
        Ok(at) => Ok(Ok(at)),
        Err(_) => Ok(Err(int.lt(0)?)),
    }
}

/// A `start`/`stop` argument of `index`, as tuple's takes it: any integer (one past the
/// `isize` range is clamped to it) or an object with `__index__`.
pub struct SliceIndex(isize);

impl<'a, 'py> FromPyObject<'a, 'py> for SliceIndex {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let found = index_of(&value, || {
            "slice indices must be integers or have an __index__ method".to_owned()
        })?;
        Ok(SliceIndex(found.unwrap_or_else(|negative| {
            if negative {
                isize::MIN
            } else {
                isize::MAX
            }
        })))
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
    /// The IDs of `ids`, an iterable of `str` (`InvalidInput`, field `ids`, otherwise).
    #[new]
    #[pyo3(signature = (ids=None))]
    fn new(ids: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        match ids {
            None => Ok(SourceIds::of(Ids::default())),
            Some(ids) => {
                if let Ok(same) = ids.cast::<SourceIds>() {
                    return Ok(SourceIds::of(same.get().ids.clone()));
                }
                Ok(SourceIds::of(Ids::from_vec(strings("ids", ids)?)))
            }
        }
    }

    /// These IDs followed by `ids`, sharing this sequence's storage: O(len(ids)).
    fn extended(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(SourceIds::of(
            self.ids
                .extended_with(strings("ids", ids)?, |id| id.clone_ref(py)),
        ))
    }

    /// True when these IDs begin with `prefix` (a `SourceIds` or a tuple); IDs held in
    /// shared storage are equal without comparing them.
    pub fn starts_with(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<bool> {
        match operand(prefix) {
            Some(prefix) => self.starts_with_operand(py, &prefix),
            None => Err(wrong_type("prefix", "a SourceIds or a tuple", prefix)),
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
            for taken in 1..=found.slicelength {
                if let Some(id) = self.ids.get(at.unsigned_abs()) {
                    items.push(id.bind(py).clone());
                }
                // Past the last item `at + step` may not fit an isize (`[1::sys.maxsize]`).
                if taken < found.slicelength {
                    at += found.step;
                }
            }
            return Ok(PyTuple::new(py, items)?.into_any());
        }
        let Ok(index) = index_of(index, || {
            format!(
                "SourceIds indices must be integers or slices, not {}",
                type_name(index)
            )
        })?
        else {
            return Err(PyIndexError::new_err(
                "cannot fit 'int' into an index-sized integer",
            ));
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

    fn __contains__(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(find(py, self.ids.iter(), value)?.is_some())
    }

    /// The position of the first `value` at or after `start` and before `stop`.
    #[pyo3(
        signature = (value, start=SliceIndex(0), stop=SliceIndex(isize::MAX)),
        text_signature = "($self, value, start=0, stop=sys.maxsize)"
    )]
    fn index(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        start: SliceIndex,
        stop: SliceIndex,
    ) -> PyResult<usize> {
        let (start, stop) = (start.0, stop.0);
        let len = isize::try_from(self.ids.len()).unwrap_or(isize::MAX);
        let clamp = |at: isize| {
            let at = if at < 0 { at + len } else { at };
            at.clamp(0, len).unsigned_abs()
        };
        let (start, stop) = (clamp(start), clamp(stop));
        find(
            py,
            self.ids.iter_from(start).take(stop.saturating_sub(start)),
            value,
        )?
        .map(|found| start + found)
        .ok_or_else(|| PyValueError::new_err("SourceIds.index(x): x not in sequence"))
    }

    fn count(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut count = 0;
        for id in self.ids.iter() {
            count += usize::from(same(py, id, value)?);
        }
        Ok(count)
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
                .equals_operand(py, &operand)?
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind()),
            CompareOp::Ne => Ok((!self.equals_operand(py, &operand)?)
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
        let mut joined = strings("other", other)?;
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

    /// Pickled (and copied) as an iterator over the IDs it has not given yet, as a tuple's
    /// iterator is: `iter(<those IDs as a tuple>)`. The copy is another iterator: neither
    /// advances the other.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyTuple>,))> {
        let at = self.next.load(std::sync::atomic::Ordering::Relaxed);
        let rest: Vec<_> = if at < self.ids.len() {
            self.ids.iter_from(at).map(|id| id.bind(py)).collect()
        } else {
            Vec::new()
        };
        let iter = py.import("builtins")?.getattr("iter")?;
        Ok((iter, (PyTuple::new(py, rest)?,)))
    }
}
