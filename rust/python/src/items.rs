//! `TurnItem`: a raw turn as it appears in an assembled context (SPEC §8).

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::turn::{digest_hash, py_repr, Turn};

/// A projection of a ledger turn: built in Rust by reference, never copying the body.
#[pyclass(frozen, module = "ledgerfold._native", name = "TurnItem")]
pub struct TurnItem {
    /// Built from Python, this turn has no digest (see `Turn::unhashed`): it stays private,
    /// and nothing here reads its digest or its protection fields.
    turn: Py<Turn>,
}

impl TurnItem {
    /// The item of a ledger turn, sharing the turn.
    pub fn of(py: Python<'_>, turn: &Py<Turn>) -> Self {
        TurnItem {
            turn: turn.clone_ref(py),
        }
    }

    /// The turn behind the item (its digest is not to be read: see the field).
    pub fn turn(&self) -> &Turn {
        self.turn.get()
    }
}

#[pymethods]
impl TurnItem {
    #[new]
    #[pyo3(signature = (id, role, text, sequence, meta=None))]
    fn py_new(
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        role: &Bound<'_, PyAny>,
        text: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let unprotected = pyo3::types::PyBool::new(py, false).to_owned().into_any();
        // Validated as a turn, but not hashed: an item is a view, and a 50 MB body would
        // cost milliseconds of BLAKE3 for a digest nobody reads.
        let turn = Turn::unhashed(py, id, sequence, role, text, &unprotected, None, None, meta)?;
        Ok(TurnItem {
            turn: Py::new(py, turn)?,
        })
    }

    #[getter]
    #[allow(clippy::unused_self)]
    fn kind(&self) -> &'static str {
        "turn"
    }

    #[getter]
    fn id<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        self.turn.get().id_obj.bind(py).clone()
    }

    #[getter]
    fn role(&self) -> &'static str {
        self.turn.get().role.as_str()
    }

    #[getter]
    fn text<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        self.turn.get().body.bind(py).clone()
    }

    #[getter]
    fn sequence(&self) -> i64 {
        self.turn.get().sequence
    }

    #[getter]
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.turn.get().meta_dict(py)
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<TurnItem>() else {
            return Ok(py.NotImplemented());
        };
        let (mine, theirs) = (self.turn.get(), other.get().turn.get());
        let equal = mine.id == theirs.id
            && mine.sequence == theirs.sequence
            && mine.role == theirs.role
            && mine.meta_slice() == theirs.meta_slice()
            && mine.body.bind(py).as_any().eq(theirs.body.bind(py))?;
        Ok(match op {
            CompareOp::Eq => equal.into_pyobject(py)?.to_owned().into_any().unbind(),
            CompareOp::Ne => (!equal).into_pyobject(py)?.to_owned().into_any().unbind(),
            _ => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> isize {
        // Items of equal fields may come from turns that differ in protection or group;
        // hash only what equality compares.
        let turn = self.turn.get();
        let mut digest = [0u8; 32];
        let id = turn.id.as_bytes();
        digest[..id.len().min(24)].copy_from_slice(&id[..id.len().min(24)]);
        digest[24..].copy_from_slice(&turn.sequence.to_le_bytes());
        digest_hash(&digest)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let turn = self.turn.get();
        Ok(format!(
            "TurnItem(id={}, role='{}', text={}, sequence={})",
            py_repr(py, &turn.id)?,
            turn.role.as_str(),
            crate::turn::sized(turn.body.bind(py).len()?, "char"),
            turn.sequence
        ))
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let turn = slf.get().turn.get();
        let args = (
            &*turn.id,
            turn.role.as_str(),
            turn.body.bind(py),
            turn.sequence,
            turn.meta_dict(py)?,
        )
            .into_pyobject(py)?;
        Ok((slf.get_type().into_any(), args))
    }
}
