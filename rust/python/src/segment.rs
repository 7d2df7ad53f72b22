//! Recall's segmentation (SPEC §16.5): `index_passages` and `query_terms` over
//! `ledgerfold_core::segment`, with character offsets in Python `str` code points.

use ledgerfold_core::segment;
use ledgerfold_core::Problem;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use rayon::prelude::*;

use crate::errors::invalid;
use crate::extract;

/// Bodies at least this long (UTF-8 bytes) are segmented detached from the interpreter: a
/// short one costs less than the detach.
const DETACH_BYTES: usize = 4096;

/// `(start, end, tokens)` of each passage of `body` that holds a token; `start`/`end` are
/// character offsets of `body`, so `body[start:end]` is the passage.
#[pyfunction]
pub fn index_passages(
    py: Python<'_>,
    body: &Bound<'_, PyAny>,
) -> PyResult<Vec<(usize, usize, String)>> {
    let text = extract::string("body", body)?.to_str()?;
    let passages = if text.len() >= DETACH_BYTES {
        py.detach(|| segment::index_passages(text))
    } else {
        segment::index_passages(text)
    };
    Ok(passages
        .into_iter()
        .map(|passage| (passage.start, passage.end, passage.tokens))
        .collect())
}

/// Bodies of at least this many UTF-8 bytes in all are segmented on the rayon pool (both
/// cores); fewer cost less in one thread than the hand-over.
const PARALLEL_BYTES: usize = 64 * 1024;

/// `index_passages` of each body, in order: one crossing for a batch (an `append_many`, an
/// index build), segmented detached from the interpreter and, for a large batch, in
/// parallel. The result is the same as calling `index_passages` on each.
#[pyfunction]
pub fn index_passages_many(
    py: Python<'_>,
    bodies: &Bound<'_, PyAny>,
) -> PyResult<Vec<Vec<(usize, usize, String)>>> {
    let held = bodies
        .try_iter()
        .map_err(|_| extract::wrong_type("bodies", "an iterable of str", bodies))?
        .collect::<PyResult<Vec<_>>>()?;
    let mut texts: Vec<&str> = Vec::with_capacity(held.len());
    for body in &held {
        texts.push(extract::string("body", body)?.to_str()?);
    }
    let bytes: usize = texts.iter().map(|text| text.len()).sum();
    let passages: Vec<Vec<segment::Passage>> = if bytes >= PARALLEL_BYTES && texts.len() > 1 {
        py.detach(|| {
            texts
                .par_iter()
                .map(|text| segment::index_passages(text))
                .collect()
        })
    } else if bytes >= DETACH_BYTES {
        py.detach(|| {
            texts
                .iter()
                .map(|text| segment::index_passages(text))
                .collect()
        })
    } else {
        texts
            .iter()
            .map(|text| segment::index_passages(text))
            .collect()
    };
    Ok(passages
        .into_iter()
        .map(|body| {
            body.into_iter()
                .map(|passage| (passage.start, passage.end, passage.tokens))
                .collect()
        })
        .collect())
}

/// The query's distinct normalised terms, first 64, in first-occurrence order. Any `str` is
/// a valid query: a lone surrogate reads as U+FFFD, which no token holds.
#[pyfunction]
pub fn query_terms(py: Python<'_>, query: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let query = query
        .cast::<PyString>()
        .map_err(|_| extract::wrong_type("query", "str", query))?;
    if let Ok(text) = query.to_str() {
        return Ok(if text.len() >= DETACH_BYTES {
            py.detach(|| segment::query_terms(text))
        } else {
            segment::query_terms(text)
        });
    }
    // Lone surrogates: read the code points one by one.
    let units = query
        .call_method1("encode", ("utf-32-le", "surrogatepass"))?
        .cast_into::<PyBytes>()
        .map_err(|_| {
            invalid(
                py,
                "query",
                Problem::NotUtf8,
                "could not be read as code points",
            )
        })?;
    let text: String = units
        .as_bytes()
        .chunks_exact(4)
        .map(|unit| {
            let code = u32::from_le_bytes([unit[0], unit[1], unit[2], unit[3]]);
            char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
        })
        .collect();
    Ok(segment::query_terms(&text))
}
