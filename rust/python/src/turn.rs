//! `Turn`: the immutable ledger value of SPEC §2, its digest computed once at construction.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use ledgerfold_core::model::{normalise_meta, validate_group, validate_id, validate_protection};
use ledgerfold_core::{encode_turn, turn_digest, Problem, ProtectionReason, Role, TurnRef};
use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::errors::{invalid, IntoPyResult};
use crate::extract;

/// Keyword fields accepted by `Turn.replace`, in constructor order.
const FIELDS: [&str; 8] = [
    "id",
    "sequence",
    "role",
    "body",
    "protected",
    "protection_reason",
    "group",
    "meta",
];

#[pyclass(frozen, module = "ledgerfold._native", name = "Turn")]
#[repr(C)] // the digest first: it shares a cache line with the object header on hot loops
pub struct Turn {
    pub digest: [u8; 32],
    pub id: Arc<str>,
    /// The same ID as a Python `str`, handed out as is (plans reuse it, so checks can
    /// compare pointers before comparing text).
    pub id_obj: Py<PyString>,
    pub sequence: i64,
    pub role: Role,
    /// Kept as the caller's `str` object: bodies can be large and are never copied.
    pub body: Py<PyString>,
    pub protected: bool,
    pub protection_reason: Option<ProtectionReason>,
    pub group: Option<Arc<str>>,
    /// Sorted by key bytes; an empty mapping is stored as `None`.
    pub meta: Option<Arc<[(String, String)]>>,
}

impl Turn {
    /// A validated turn with its digest computed (SPEC §3).
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
        role: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        protected: &Bound<'_, PyAny>,
        protection_reason: Option<&Bound<'_, PyAny>>,
        group: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut turn = Turn::unhashed(
            py,
            id,
            sequence,
            role,
            body,
            protected,
            protection_reason,
            group,
            meta,
        )?;
        turn.digest = turn.with_body(py, |view| turn_digest(&view))?;
        Ok(turn)
    }

    /// A validated turn whose digest is all zeros: only for a value that never exposes the
    /// turn nor compares or hashes by its digest (a `TurnItem` built from Python).
    #[allow(clippy::too_many_arguments)]
    pub fn unhashed(
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
        role: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        protected: &Bound<'_, PyAny>,
        protection_reason: Option<&Bound<'_, PyAny>>,
        group: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let id_str = extract::string("id", id)?;
        let id = id_str.to_str()?.to_owned();
        validate_id("id", &id).or_raise(py)?;
        let id_obj = if id_str.is_exact_instance_of::<PyString>() {
            id_str.clone().unbind()
        } else {
            PyString::new(py, &id).unbind()
        };
        let sequence = extract::non_negative("sequence", sequence)?;
        let role = Role::parse(extract::string("role", role)?.to_str()?).or_raise(py)?;
        let body_str = extract::string("body", body)?;
        let protected = extract::boolean("protected", protected)?;
        let protection_reason = extract::optional_string("protection_reason", protection_reason)?
            .map(|reason| ProtectionReason::parse(&reason))
            .transpose()
            .or_raise(py)?;
        validate_protection(protected, protection_reason).or_raise(py)?;
        let group = extract::optional_string("group", group)?;
        validate_group(group.as_deref()).or_raise(py)?;
        let mut meta = extract::meta_pairs(meta)?.unwrap_or_default();
        normalise_meta(&mut meta).or_raise(py)?;
        // A str subclass is stored as a plain str so the value cannot change under us.
        let body = if body_str.is_exact_instance_of::<PyString>() {
            body_str.clone().unbind()
        } else {
            PyString::new(py, body_str.to_str()?).unbind()
        };
        Ok(Turn {
            id: id.into(),
            id_obj,
            sequence,
            role,
            body,
            protected,
            protection_reason,
            group: group.map(Into::into),
            meta: if meta.is_empty() {
                None
            } else {
                Some(meta.into())
            },
            digest: [0; 32],
        })
    }

    pub fn meta_slice(&self) -> &[(String, String)] {
        self.meta.as_deref().unwrap_or(&[])
    }

    pub fn meta_dict<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.meta
            .as_ref()
            .map(|pairs| {
                let dict = PyDict::new(py);
                for (key, value) in pairs.iter() {
                    dict.set_item(key, value)?;
                }
                Ok(dict)
            })
            .transpose()
    }

    fn with_body<R>(&self, py: Python<'_>, f: impl FnOnce(TurnRef<'_>) -> R) -> PyResult<R> {
        let body = self.body.bind(py);
        Ok(f(TurnRef {
            id: &self.id,
            sequence: self.sequence,
            role: self.role,
            protected: self.protected,
            protection_reason: self.protection_reason,
            group: self.group.as_deref(),
            meta: self.meta_slice(),
            body: body.to_str()?,
        }))
    }

    /// Field-by-field equality; the digest comparison rejects most unequal pairs cheaply.
    pub fn same_value(&self, py: Python<'_>, other: &Turn) -> PyResult<bool> {
        Ok(self.digest == other.digest
            && self.id == other.id
            && self.sequence == other.sequence
            && self.role == other.role
            && self.protected == other.protected
            && self.protection_reason == other.protection_reason
            && self.group == other.group
            && self.meta_slice() == other.meta_slice()
            && self.body.bind(py).as_any().eq(other.body.bind(py))?)
    }

    fn field_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            self.id_obj.bind(py),
            self.sequence,
            self.role.as_str(),
            self.body.bind(py),
            self.protected,
            self.protection_reason.map(ProtectionReason::as_str),
            self.group.as_deref(),
            self.meta_dict(py)?,
        )
            .into_pyobject(py)
    }
}

/// Python's `repr` of a string (IDs are shown; bodies never are).
pub fn py_repr(py: Python<'_>, text: &str) -> PyResult<String> {
    Ok(PyString::new(py, text).repr()?.to_string())
}

/// How a repr shows a value it hides by its size: `<1 char>`, `<3 chars>`.
pub fn sized(count: usize, word: &str) -> String {
    if count == 1 {
        format!("<1 {word}>")
    } else {
        format!("<{count} {word}s>")
    }
}

pub fn digest_hash(digest: &[u8; 32]) -> isize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    digest.hash(&mut hasher);
    // Truncation is the point: Python hashes are machine words.
    #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
    let value = hasher.finish() as isize;
    if value == -1 {
        -2
    } else {
        value
    }
}

#[pymethods]
impl Turn {
    #[new]
    #[pyo3(signature = (id, sequence, role, body, *, protected=None, protection_reason=None, group=None, meta=None))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
        role: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        protected: Option<&Bound<'_, PyAny>>,
        protection_reason: Option<&Bound<'_, PyAny>>,
        group: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let default_protected = pyo3::types::PyBool::new(py, false).to_owned().into_any();
        Turn::build(
            py,
            id,
            sequence,
            role,
            body,
            protected.unwrap_or(&default_protected),
            protection_reason,
            group,
            meta,
        )
    }

    /// Rebuilds a turn from positional fields (used by pickling).
    #[classmethod]
    #[pyo3(name = "_from_fields")]
    #[allow(clippy::too_many_arguments)]
    fn from_fields(
        _cls: &Bound<'_, pyo3::types::PyType>,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
        role: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        protected: &Bound<'_, PyAny>,
        protection_reason: &Bound<'_, PyAny>,
        group: &Bound<'_, PyAny>,
        meta: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Turn::build(
            py,
            id,
            sequence,
            role,
            body,
            protected,
            Some(protection_reason),
            Some(group),
            Some(meta),
        )
    }

    #[getter]
    fn id<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        self.id_obj.bind(py).clone()
    }

    #[getter]
    fn sequence(&self) -> i64 {
        self.sequence
    }

    #[getter]
    fn role(&self) -> &'static str {
        self.role.as_str()
    }

    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        self.body.bind(py).clone()
    }

    #[getter]
    fn protected(&self) -> bool {
        self.protected
    }

    #[getter]
    fn protection_reason(&self) -> Option<&'static str> {
        self.protection_reason.map(ProtectionReason::as_str)
    }

    #[getter]
    fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// A fresh `dict` copy on every read (the turn itself never changes), or `None`.
    #[getter]
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.meta_dict(py)
    }

    /// The 32-byte turn digest of SPEC §3.
    #[getter]
    fn digest<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.digest)
    }

    /// The canonical encoding of SPEC §3 (what the digest is computed over).
    fn encoding<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with_body(py, |view| encode_turn(&view))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A new validated turn with the given fields changed.
    #[pyo3(signature = (**changes))]
    fn replace(&self, py: Python<'_>, changes: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let current = self.field_tuple(py)?;
        let mut values: Vec<Bound<'_, PyAny>> = current.iter().collect();
        if let Some(changes) = changes {
            for (key, value) in changes.iter() {
                let name = extract::owned_string("replace", &key)?;
                let Some(slot) = FIELDS.iter().position(|field| *field == name) else {
                    return Err(invalid(
                        py,
                        "replace",
                        Problem::UnknownValue,
                        format!("Turn has no field {name:?}"),
                    ));
                };
                values[slot] = value;
            }
        }
        Turn::build(
            py,
            &values[0],
            &values[1],
            &values[2],
            &values[3],
            &values[4],
            Some(&values[5]),
            Some(&values[6]),
            Some(&values[7]),
        )
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Turn>() else {
            return Ok(py.NotImplemented());
        };
        let equal = self.same_value(py, other.get())?;
        Ok(match op {
            CompareOp::Eq => equal.into_pyobject(py)?.to_owned().into_any().unbind(),
            CompareOp::Ne => (!equal).into_pyobject(py)?.to_owned().into_any().unbind(),
            _ => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> isize {
        digest_hash(&self.digest)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        use std::fmt::Write;
        let mut text = format!(
            "Turn(id={}, sequence={}, role='{}', body={}, protected={}",
            py_repr(py, &self.id)?,
            self.sequence,
            self.role.as_str(),
            sized(self.body.bind(py).len()?, "char"),
            if self.protected { "True" } else { "False" },
        );
        if let Some(reason) = self.protection_reason {
            let _ = write!(text, ", protection_reason='{}'", reason.as_str());
        }
        if let Some(group) = &self.group {
            let _ = write!(text, ", group={}", py_repr(py, group)?);
        }
        if let Some(meta) = &self.meta {
            let keys = PyTuple::new(py, meta.iter().map(|(key, _)| key.as_str()))?;
            let _ = write!(text, ", meta_keys={}", keys.repr()?);
        }
        text.push(')');
        Ok(text)
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let rebuild = slf.get_type().getattr("_from_fields")?;
        Ok((rebuild, slf.get().field_tuple(py)?))
    }

    fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __deepcopy__<'py>(slf: Bound<'py, Self>, _memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
        slf
    }
}
