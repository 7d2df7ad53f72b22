//! Turns from stored rows in one crossing, each row's stored digest trusted (not re-hashed):
//! the store keeps digests honest by eager invalidation and deep revalidation (SPEC §15).

use ledgerfold_core::meta_json::parse_flat_object;
use ledgerfold_core::model::{normalise_meta, validate_group, validate_id, validate_protection};
use ledgerfold_core::{Problem, ProtectionReason, Role};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyIterator, PyString, PyTuple};

use crate::errors::{in_row, invalid, IntoPyResult};
use crate::extract;
use crate::turn::Turn;
use crate::untracked::new_untracked;

/// `(id, sequence, role, body, protected, protection_reason, group, meta_json, digest)`.
const ROW_FIELDS: usize = 9;

/// The turns of `rows`, in the order given; a bad row raises `InvalidInput` naming its
/// index and field.
pub fn turns_from_rows(py: Python<'_>, rows: &Bound<'_, PyAny>) -> PyResult<Vec<Py<Turn>>> {
    if rows.is_instance_of::<PyString>() {
        return Err(extract::wrong_type(
            "rows",
            "an iterable of row tuples",
            rows,
        ));
    }
    let iterator = PyIterator::from_object(rows)
        .map_err(|_| extract::wrong_type("rows", "an iterable of row tuples", rows))?;
    let mut turns = Vec::with_capacity(extract::capacity_hint(rows));
    for (index, row) in iterator.enumerate() {
        let turn = turn_from_row(py, &row?).map_err(|err| in_row(py, index, err))?;
        turns.push(new_untracked(py, turn)?);
    }
    Ok(turns)
}

fn turn_from_row(py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<Turn> {
    let expected = "a tuple of 9 fields (id, sequence, role, body, protected, \
                    protection_reason, group, meta_json, digest)";
    let row = row
        .cast::<PyTuple>()
        .map_err(|_| extract::wrong_type("row", expected, row))?;
    if row.len() != ROW_FIELDS {
        return Err(invalid(
            py,
            "row",
            Problem::WrongType,
            format!("must be {expected}, got {} fields", row.len()),
        ));
    }
    let field = |index| row.get_item(index);
    let id_str = extract::string("id", &field(0)?)?.clone();
    let id = id_str.to_str()?;
    validate_id("id", id).or_raise(py)?;
    let sequence = extract::non_negative("sequence", &field(1)?)?;
    let role = Role::parse(extract::string("role", &field(2)?)?.to_str()?).or_raise(py)?;
    let body = extract::string("body", &field(3)?)?.clone();
    let protected = stored_flag(&field(4)?)?;
    let protection_reason = extract::optional_string("protection_reason", Some(&field(5)?))?
        .map(|reason| ProtectionReason::parse(&reason))
        .transpose()
        .or_raise(py)?;
    validate_protection(protected, protection_reason).or_raise(py)?;
    let group = extract::optional_string("group", Some(&field(6)?))?;
    validate_group(group.as_deref()).or_raise(py)?;
    let meta = stored_meta(&field(7)?)?;
    let digest = stored_digest(&field(8)?)?;
    Ok(Turn {
        digest,
        id: id.into(),
        // A str subclass is stored as a plain str, as `Turn` does.
        id_obj: plain(py, &id_str)?,
        sequence,
        role,
        body: plain(py, &body)?,
        protected,
        protection_reason,
        group: group.map(Into::into),
        meta: (!meta.is_empty()).then(|| meta.into()),
    })
}

fn plain(py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Py<PyString>> {
    Ok(if text.is_exact_instance_of::<PyString>() {
        text.clone().unbind()
    } else {
        PyString::new(py, text.to_str()?).unbind()
    })
}

/// `protected` as the database returns it (`0` or `1`), or a `bool`.
fn stored_flag(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if value.is_instance_of::<PyBool>() {
        return extract::boolean("protected", value);
    }
    if !value.is_instance_of::<PyInt>() {
        return Err(extract::wrong_type("protected", "bool, 0 or 1", value));
    }
    match value.extract::<i64>() {
        Ok(0) => Ok(false),
        Ok(1) => Ok(true),
        _ => Err(invalid(
            value.py(),
            "protected",
            Problem::OutOfRange,
            "must be bool, 0 or 1",
        )),
    }
}

/// The stored JSON text of `meta` (a flat object of strings) or `None`, sorted by key.
fn stored_meta(value: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    if value.is_none() {
        return Ok(Vec::new());
    }
    let text = extract::string("meta", value)?.to_str()?;
    let Some(mut meta) = parse_flat_object(text) else {
        return Err(invalid(
            value.py(),
            "meta",
            Problem::WrongType,
            "must be the JSON text of an object of str to str, or None",
        ));
    };
    normalise_meta(&mut meta).or_raise(value.py())?;
    Ok(meta)
}

fn stored_digest(value: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    let bytes = value
        .cast::<PyBytes>()
        .map_err(|_| extract::wrong_type("digest", "bytes", value))?;
    bytes.as_bytes().try_into().map_err(|_| {
        invalid(
            value.py(),
            "digest",
            Problem::OutOfRange,
            format!("must be 32 bytes, got {}", bytes.as_bytes().len()),
        )
    })
}
