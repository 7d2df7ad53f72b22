//! `ledgerfold._native`: the `PyO3` binding of `ledgerfold-core`.
//!
//! Values cross once: Python objects are read while attached, the byte work runs in Rust.

mod constants;
mod conversation;
mod errors;
mod extract;
mod items;
mod ops;
mod revalidate;
mod turn;

use pyo3::prelude::*;

#[pymodule]
mod _native {
    #[pymodule_export]
    use crate::conversation::Conversation;
    #[pymodule_export]
    use crate::items::TurnItem;
    #[pymodule_export]
    use crate::ops::{
        assemble, check, fingerprint_turns, plan, same_ordered_ids, source_fingerprint,
    };
    #[pymodule_export]
    use crate::revalidate::{revalidate_columns, revalidate_flat};
    #[pymodule_export]
    use crate::turn::Turn;

    /// The codes and packed-format constants (see `constants`).
    #[pymodule_init]
    fn init(module: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        crate::constants::add(module)
    }
}
