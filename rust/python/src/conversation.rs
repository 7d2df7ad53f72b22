//! `Conversation`: an immutable snapshot, normalised to ascending sequence, O(1) lookup by ID.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use ledgerfold_core::model::validate_id;
use ledgerfold_core::units::Units;
use ledgerfold_core::{CoreError, Problem};
use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList, PyString, PyTuple};

use crate::errors::{invalid, to_py_err, IntoPyResult};
use crate::extract;
use crate::turn::Turn;

#[pyclass(frozen, module = "ledgerfold._native", name = "Conversation")]
pub struct Conversation {
    pub id: String,
    pub revision: i64,
    /// Ascending sequence.
    pub turns: Vec<Py<Turn>>,
    /// `turns[p].id_obj` and `turns[p].digest`, contiguous so that checks walk memory in order.
    pub ids: Vec<Py<PyString>>,
    pub digests: Vec<[u8; 32]>,
    tuple: Py<PyTuple>,
    /// Turn ID -> position in `turns`.
    index: HashMap<Arc<str>, usize>,
    /// Positions of the turns with a `group` or `meta`: the only ones that can share a
    /// compaction unit (SPEC §17.2) with another turn.
    linkable: Vec<usize>,
    /// The compaction units, computed once, on first need (`units`): a snapshot never
    /// changes, so every check, assembly and plan over it shares them.
    units: OnceLock<Units>,
}

/// Collects `Turn`s from any iterable, with a clear error for anything else.
pub fn collect_turns(
    py: Python<'_>,
    field: &'static str,
    turns: &Bound<'_, PyAny>,
) -> PyResult<Vec<Py<Turn>>> {
    if let Ok(conversation) = turns.cast::<Conversation>() {
        return Ok(conversation
            .get()
            .turns
            .iter()
            .map(|turn| turn.clone_ref(py))
            .collect());
    }
    if turns.is_instance_of::<PyString>() {
        return Err(extract::wrong_type(field, "an iterable of Turn", turns));
    }
    let iterator = PyIterator::from_object(turns)
        .map_err(|_| extract::wrong_type(field, "an iterable of Turn", turns))?;
    let mut out = Vec::with_capacity(extract::capacity_hint(turns));
    for item in iterator {
        let item = item?;
        let turn = item
            .cast::<Turn>()
            .map_err(|_| extract::wrong_type(field, "an iterable of Turn", &item))?;
        out.push(turn.clone().unbind());
    }
    Ok(out)
}

impl Conversation {
    pub fn build(
        py: Python<'_>,
        id: String,
        revision: i64,
        mut turns: Vec<Py<Turn>>,
    ) -> PyResult<Self> {
        validate_id("id", &id).or_raise(py)?;
        turns.sort_by_key(|turn| turn.get().sequence);
        let mut index = HashMap::with_capacity(turns.len());
        let mut linkable = Vec::new();
        for (position, turn) in turns.iter().enumerate() {
            let turn = turn.get();
            if turn.group.is_some() || turn.meta.is_some() {
                linkable.push(position);
            }
            if index.insert(turn.id.clone(), position).is_some() {
                return Err(to_py_err(
                    py,
                    CoreError::DuplicateId {
                        id: turn.id.to_string(),
                    },
                ));
            }
            if position > 0 {
                let previous = turns[position - 1].get();
                if previous.sequence == turn.sequence {
                    return Err(invalid(
                        py,
                        "sequence",
                        Problem::Duplicate,
                        format!(
                            "turns {:?} and {:?} share sequence {}",
                            &*previous.id, &*turn.id, turn.sequence
                        ),
                    ));
                }
            }
        }
        let tuple = PyTuple::new(py, turns.iter().map(|turn| turn.bind(py)))?.unbind();
        let ids = turns
            .iter()
            .map(|turn| turn.get().id_obj.clone_ref(py))
            .collect();
        let digests = turns.iter().map(|turn| turn.get().digest).collect();
        Ok(Conversation {
            id,
            revision,
            turns,
            ids,
            digests,
            tuple,
            index,
            linkable,
            units: OnceLock::new(),
        })
    }

    /// The compaction units of the turns (SPEC §17.2), computed on the first call from the
    /// turns with a group or meta only; later calls (from any thread) share them. Computing
    /// them needs no interpreter.
    pub fn units(&self) -> &Units {
        self.units.get_or_init(|| {
            Units::of(
                self.turns.len(),
                self.linkable.iter().map(|&position| {
                    let turn = self.turns[position].get();
                    (
                        position,
                        turn.role,
                        turn.group.as_deref(),
                        turn.meta_slice(),
                    )
                }),
            )
        })
    }

    /// Positions (ascending) of the turns with a group or meta: the only ones that can link.
    pub fn linkable(&self) -> &[usize] {
        &self.linkable
    }

    pub fn position(&self, turn_id: &str) -> Option<usize> {
        self.index.get(turn_id).copied()
    }

    pub fn turn(&self, position: usize) -> &Turn {
        self.turns[position].get()
    }
}

#[pymethods]
impl Conversation {
    #[new]
    fn py_new(
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        revision: &Bound<'_, PyAny>,
        turns: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let id = extract::owned_string("id", id)?;
        let revision = extract::non_negative("revision", revision)?;
        let turns = collect_turns(py, "turns", turns)?;
        Conversation::build(py, id, revision, turns)
    }

    /// A conversation from rows as the store reads them, `(id, sequence, role, body,
    /// protected, protection_reason, group, meta_json, digest)`, in one call: each row's
    /// digest is trusted, not recomputed. Private (the store's, issue 25 item 11): a caller
    /// could pair an edited body with its old digest and make a stale summary look current.
    #[classmethod]
    #[pyo3(name = "_from_rows")]
    fn from_rows(
        _cls: &Bound<'_, pyo3::types::PyType>,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        revision: &Bound<'_, PyAny>,
        rows: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let id = extract::owned_string("id", id)?;
        let revision = extract::non_negative("revision", revision)?;
        let turns = crate::rows::turns_from_rows(py, rows)?;
        Conversation::build(py, id, revision, turns)
    }

    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    #[getter]
    fn revision(&self) -> i64 {
        self.revision
    }

    /// The turns in ascending sequence.
    #[getter]
    fn turns<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        self.tuple.bind(py).clone()
    }

    /// The IDs of the turns in ascending sequence.
    #[getter]
    fn turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.ids.iter().map(|id| id.bind(py)))
    }

    /// The turn with this ID, or `None`.
    fn get(&self, py: Python<'_>, turn_id: &Bound<'_, PyAny>) -> PyResult<Option<Py<Turn>>> {
        let turn_id = extract::string("turn_id", turn_id)?;
        Ok(self
            .position(turn_id.to_str()?)
            .map(|position| self.turns[position].clone_ref(py)))
    }

    /// The position of this turn in sequence order, or `None`.
    fn index_of(&self, turn_id: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        let turn_id = extract::string("turn_id", turn_id)?;
        Ok(self.position(turn_id.to_str()?))
    }

    fn __contains__(&self, turn_id: &Bound<'_, PyAny>) -> bool {
        turn_id
            .cast::<PyString>()
            .ok()
            .and_then(|id| id.to_str().ok().and_then(|id| self.position(id)))
            .is_some()
    }

    fn __len__(&self) -> usize {
        self.turns.len()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        PyIterator::from_object(self.tuple.bind(py))
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Conversation>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let mut equal = self.id == other.id
            && self.revision == other.revision
            && self.turns.len() == other.turns.len();
        if equal {
            for (mine, theirs) in self.turns.iter().zip(&other.turns) {
                if !mine.get().same_value(py, theirs.get())? {
                    equal = false;
                    break;
                }
            }
        }
        Ok(match op {
            CompareOp::Eq => equal.into_pyobject(py)?.to_owned().into_any().unbind(),
            CompareOp::Ne => (!equal).into_pyobject(py)?.to_owned().into_any().unbind(),
            _ => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> isize {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.id.hash(&mut hasher);
        self.revision.hash(&mut hasher);
        for turn in &self.turns {
            turn.get().digest.hash(&mut hasher);
        }
        #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
        let value = hasher.finish() as isize;
        if value == -1 {
            -2
        } else {
            value
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Conversation(id={}, revision={}, turns={})",
            crate::turn::py_repr(py, &self.id)?,
            self.revision,
            crate::turn::sized(self.turns.len(), "turn")
        ))
    }

    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (String, i64, Bound<'py, PyList>))> {
        let py = slf.py();
        let me = slf.get();
        let turns = PyList::new(py, me.turns.iter().map(|turn| turn.bind(py)))?;
        Ok((
            slf.get_type().into_any(),
            (me.id.clone(), me.revision, turns),
        ))
    }
}
