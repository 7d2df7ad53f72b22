//! The one place where Rust errors become Python exceptions (`ledgerfold._errors`).
//!
//! Messages name fields and IDs, never turn bodies or summary text.

use ledgerfold_core::{CoreError, Problem};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS_MODULE
        .get_or_try_init(py, || Ok(py.import("ledgerfold._errors")?.unbind()))
        .map(|module| module.bind(py))
}

fn build(py: Python<'_>, class: &str, message: String, kwargs: &[(&str, &str)]) -> PyResult<PyErr> {
    let module = errors_module(py)?;
    let kw = PyDict::new(py);
    for (key, value) in kwargs {
        kw.set_item(key, value)?;
    }
    let instance = module.getattr(class)?.call((message,), Some(&kw))?;
    Ok(PyErr::from_value(instance))
}

/// Maps a core error to `InvalidInput` / `DuplicateId`.
pub fn to_py_err(py: Python<'_>, err: CoreError) -> PyErr {
    let message = err.to_string();
    let built = match &err {
        CoreError::InvalidInput { field, problem, .. } => build(
            py,
            "InvalidInput",
            message.clone(),
            &[("field", field), ("problem", problem.as_str())],
        ),
        CoreError::DuplicateId { id } => build(py, "DuplicateId", message.clone(), &[("id", id)]),
    };
    // Only if ledgerfold._errors itself cannot be imported; still a ValueError.
    built.unwrap_or_else(|_| PyValueError::new_err(message))
}

/// Shorthand for an `InvalidInput` about one field.
pub fn invalid(
    py: Python<'_>,
    field: &'static str,
    problem: Problem,
    message: impl Into<String>,
) -> PyErr {
    to_py_err(py, CoreError::invalid(field, problem, message))
}

/// An `InvalidInput` about one field of one row, restated as `rows[<index>].<field>: ...`
/// (`field` and `problem` kept); any other error as it is.
pub fn in_row(py: Python<'_>, index: usize, err: PyErr) -> PyErr {
    let restate = |err: &PyErr| -> PyResult<Option<PyErr>> {
        let class = errors_module(py)?.getattr("InvalidInput")?;
        let value = err.value(py);
        if !value.get_type().is(&class) {
            return Ok(None);
        }
        let kw = PyDict::new(py);
        kw.set_item("field", value.getattr("field")?)?;
        kw.set_item("problem", value.getattr("problem")?)?;
        let message = format!("rows[{index}].{}", value.str()?);
        Ok(Some(PyErr::from_value(class.call((message,), Some(&kw))?)))
    };
    match restate(&err) {
        Ok(Some(restated)) => restated,
        _ => err,
    }
}

pub trait IntoPyResult<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, CoreError> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|err| to_py_err(py, err))
    }
}
