//! Strict extraction of SPEC §2 field values: wrong types, bools for ints, out-of-range
//! integers and lone surrogates all become `InvalidInput` naming the field.

use ledgerfold_core::Problem;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyIterator, PyMapping, PyString};

use crate::errors::invalid;

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |name| name.to_string())
}

pub fn wrong_type(field: &'static str, expected: &str, value: &Bound<'_, PyAny>) -> PyErr {
    invalid(
        value.py(),
        field,
        Problem::WrongType,
        format!("must be {expected}, got {}", type_name(value)),
    )
}

/// The most items a collection's `len()` may reserve room for before they are read.
const MAX_RESERVED: usize = 1 << 16;

/// Room to reserve for the items of `value`, from its `len()` when it has one: a hint only,
/// never trusted beyond `MAX_RESERVED` (an object's `__len__` may say anything; reserving
/// what it says panics with a capacity overflow, or aborts the process when the allocation
/// fails). Vectors grow past it as the items are read.
pub fn capacity_hint(value: &Bound<'_, PyAny>) -> usize {
    value.len().map_or(0, |len| len.min(MAX_RESERVED))
}

/// A `str` (or subclass) that encodes as UTF-8.
pub fn string<'a, 'py>(
    field: &'static str,
    value: &'a Bound<'py, PyAny>,
) -> PyResult<&'a Bound<'py, PyString>> {
    let text = value
        .cast::<PyString>()
        .map_err(|_| wrong_type(field, "str", value))?;
    if text.to_str().is_err() {
        return Err(invalid(
            value.py(),
            field,
            Problem::NotUtf8,
            "must encode as UTF-8 (lone surrogates are invalid)",
        ));
    }
    Ok(text)
}

/// The `str`s of an iterable (not of a lone `str`), borrowed from their Python objects.
pub fn string_items<'py>(
    field: &'static str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Vec<Bound<'py, PyString>>> {
    if value.is_instance_of::<PyString>() {
        return Err(wrong_type(field, "an iterable of str", value));
    }
    let iterator = PyIterator::from_object(value)
        .map_err(|_| wrong_type(field, "an iterable of str", value))?;
    let mut out = Vec::with_capacity(capacity_hint(value));
    for item in iterator {
        let item = item?;
        out.push(string(field, &item)?.clone());
    }
    Ok(out)
}

pub fn as_strs<'a>(items: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    items.iter().map(|item| item.to_str()).collect()
}

pub fn owned_string(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(string(field, value)?.to_str()?.to_owned())
}

pub fn optional_string(
    field: &'static str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<String>> {
    match value {
        Some(value) if !value.is_none() => owned_string(field, value).map(Some),
        _ => Ok(None),
    }
}

/// An `int` (not `bool`) that fits in i64.
pub fn int64(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<i64> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(wrong_type(field, "int", value));
    }
    value.extract::<i64>().map_err(|_| {
        invalid(
            value.py(),
            field,
            Problem::OutOfRange,
            "must fit in a signed 64-bit integer",
        )
    })
}

/// A non-negative `int` that fits in i64.
pub fn non_negative(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<i64> {
    let number = int64(field, value)?;
    if number < 0 {
        return Err(invalid(
            value.py(),
            field,
            Problem::OutOfRange,
            "must be >= 0",
        ));
    }
    Ok(number)
}

pub fn boolean(field: &'static str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    value
        .cast::<PyBool>()
        .map(pyo3::types::PyBoolMethods::is_true)
        .map_err(|_| wrong_type(field, "bool", value))
}

/// `None` or a mapping of `str` to `str`, as unsorted pairs.
pub fn meta_pairs(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<(String, String)>>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(None);
    };
    let mapping = value
        .cast::<PyMapping>()
        .map_err(|_| wrong_type("meta", "a mapping of str to str or None", value))?;
    let mut pairs = Vec::with_capacity(capacity_hint(mapping.as_any()));
    // A mapping whose `items()` gives no iterable of pairs (an override) is no mapping of
    // str to str: `InvalidInput`, as any other wrong `meta`. An exception its own code
    // raises otherwise (a `KeyError` of its `__getitem__`) is its own, and propagates.
    let items = mapping.items().map_err(|err| {
        if err.is_instance_of::<PyTypeError>(value.py()) {
            wrong_type("meta", "a mapping of str to str or None", value)
        } else {
            err
        }
    })?;
    for item in items.iter() {
        let (key, entry): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item
            .extract()
            .map_err(|_| wrong_type("meta", "a mapping of str to str or None", value))?;
        pairs.push((owned_string("meta", &key)?, owned_string("meta", &entry)?));
    }
    Ok(Some(pairs))
}
