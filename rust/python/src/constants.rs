//! The codes and packed-format constants the Python side derives from, so that it copies
//! no number of the core: SPEC §3's role and protection-reason codes, the check reasons in
//! the order they are checked, and every constant of the packed revalidation format
//! (`ledgerfold_core::columns::format`), from which Python generates the query that packs.

use ledgerfold_core::check::CheckReason;
use ledgerfold_core::columns::format;
use ledgerfold_core::{ProtectionReason, Role};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMappingProxy, PyTuple};

/// A read-only `{name: code}` mapping, in code order.
fn codes(
    py: Python<'_>,
    entries: impl IntoIterator<Item = (&'static str, u8)>,
) -> PyResult<Bound<'_, PyMappingProxy>> {
    let dict = PyDict::new(py);
    for (name, code) in entries {
        dict.set_item(name, code)?;
    }
    Ok(PyMappingProxy::new(py, dict.as_mapping()))
}

pub fn add(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add(
        "ROLE_CODES",
        codes(py, Role::ALL.map(|role| (role.as_str(), role.code())))?,
    )?;
    module.add(
        "PROTECTION_REASON_CODES",
        codes(
            py,
            ProtectionReason::ALL.map(|reason| (reason.as_str(), reason.code())),
        )?,
    )?;
    module.add(
        "CHECK_REASONS",
        PyTuple::new(py, CheckReason::ALL.map(CheckReason::as_str))?,
    )?;
    module.add(
        "PACKED_SEPARATOR",
        char::from(format::SEPARATOR).to_string(),
    )?;
    for (name, value) in [
        ("PACKED_NULL_LENGTH", format::NULL_LENGTH),
        ("PACKED_TURN_KEY_SUMMARY", format::TURN_KEY_SUMMARY),
        ("PACKED_TURN_KEY_ROLE", format::TURN_KEY_ROLE),
        ("PACKED_TURN_KEY_PROTECTED", format::TURN_KEY_PROTECTED),
        ("PACKED_TURN_KEY_REASON", format::TURN_KEY_REASON),
        ("PACKED_UNKNOWN_CODE", format::UNKNOWN_CODE),
        (
            "PACKED_SOURCE_SUMMARY_SHIFT",
            i64::from(format::SOURCE_SUMMARY_SHIFT),
        ),
        (
            "PACKED_SOURCE_POSITION_SHIFT",
            i64::from(format::SOURCE_POSITION_SHIFT),
        ),
        (
            "PACKED_SOURCE_POSITION_BITS",
            i64::from(format::SOURCE_POSITION_BITS),
        ),
        (
            "PACKED_SOURCE_ID_LENGTH_BITS",
            i64::from(format::SOURCE_ID_LENGTH_BITS),
        ),
        (
            "PACKED_MAX_SUMMARIES",
            i64::try_from(format::MAX_SUMMARIES).unwrap_or(i64::MAX),
        ),
    ] {
        module.add(name, value)?;
    }
    Ok(())
}
