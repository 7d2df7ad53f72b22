//! `ledgerfold._native`: the `PyO3` binding of `ledgerfold-core`.
//!
//! Values cross once: Python objects are read while attached, the byte work runs in Rust.

mod assemble;
mod check;
mod constants;
mod conversation;
mod errors;
mod extract;
mod fingerprint;
mod items;
mod plan;
mod revalidate;
mod revalidate_columns;
mod rows;
mod segment;
mod source_ids;
mod turn;
mod units;
mod untracked;

use pyo3::prelude::*;

#[pymodule]
mod _native {
    #[pymodule_export]
    use crate::assemble::assemble;
    #[pymodule_export]
    use crate::check::check;
    #[pymodule_export]
    use crate::conversation::Conversation;
    #[pymodule_export]
    use crate::fingerprint::{
        fingerprint_digests, fingerprint_turns, source_fingerprint, SourceDigests,
    };
    #[pymodule_export]
    use crate::items::TurnItem;
    #[pymodule_export]
    use crate::plan::{plan, same_ordered_ids, starts_with_ids};
    #[pymodule_export]
    use crate::revalidate::revalidate_flat;
    #[pymodule_export]
    use crate::revalidate_columns::{audit_columns, revalidate_columns};
    #[pymodule_export]
    use crate::segment::{index_passages, index_passages_many, query_terms};
    #[pymodule_export]
    use crate::source_ids::{SourceIds, SourceIdsIterator};
    #[pymodule_export]
    use crate::turn::Turn;
    #[pymodule_export]
    use crate::units::{
        answer_makers, chat_order, open_calls, unit_roots, unsendable, unsendable_count,
    };

    /// The segmenter's version (SPEC §16.5): recorded with the index, which a change rebuilds.
    #[pymodule_export]
    const INDEX_VERSION: u32 = ledgerfold_core::segment::INDEX_VERSION;

    /// The codes and packed-format constants (see `constants`).
    #[pymodule_init]
    fn init(module: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        crate::constants::add(module)
    }
}
