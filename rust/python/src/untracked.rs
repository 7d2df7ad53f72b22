//! Objects the cycle collector need not see.
//!
//! Every `#[pyclass]` is a GC type, so each new `TurnItem` or ledger `Turn` joins the cycle
//! collector's lists; an assembled context of a 200k-turn ledger is 200k new objects, and
//! the full collections they trigger traverse every tracked object of the process (measured:
//! a raw fallback of 200k turns, 183–238 ms with the collector on, 28–37 ms with it off).
//! Pausing the collector is a process-wide switch, which a library must not flip. Instead
//! the objects that can never be part of a reference cycle are taken off its lists, as
//! `CPython` does for tuples and dicts of atomic values.
//!
//! This is the binding's only `unsafe` code.

use pyo3::prelude::*;
use pyo3::PyClass;

use crate::items::TurnItem;
use crate::turn::Turn;

/// A class whose instances hold no reference that can lead back to them.
///
/// # Safety contract (checked by review, stated per type below)
/// The type's fields hold only Rust values, Python `str` objects and references to other
/// `Acyclic` types; it is `frozen` and not `subclass`, so no instance gains a `__dict__` or
/// a field later.
pub trait Acyclic: PyClass {}

// `Turn`: Rust values and `Py<PyString>` (id, body) only.
impl Acyclic for Turn {}
// `TurnItem`: one `Py<Turn>`.
impl Acyclic for TurnItem {}

/// A new Python object of `value`, not tracked by the cycle collector.
pub fn new_untracked<T: Acyclic>(py: Python<'_>, value: T) -> PyResult<Py<T>>
where
    PyClassInitializer<T>: From<T>,
{
    let object = Py::new(py, value)?;
    untrack(object.bind(py));
    Ok(object)
}

#[allow(unsafe_code)]
fn untrack<T: Acyclic>(object: &Bound<'_, T>) {
    // SAFETY: `object` is a live instance of a GC type (every pyclass is one) and this thread
    // is attached to the interpreter. `PyObject_GC_UnTrack` may be called on any tracked or
    // untracked GC object, and the type's `tp_dealloc` untracks again (a no-op then). An
    // untracked object is never traversed, so the references it holds count as external:
    // what it refers to stays alive as long as it does, which is what reference counting
    // alone gives. `Acyclic` guarantees no cycle passes through it, so none leaks.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(object.as_ptr().cast()) };
}
