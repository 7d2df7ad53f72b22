//! A batch of stored rows packed by column, the way one `SQLite` aggregate query hands it
//! over: one result row per batch instead of one per turn, so the reader skips the per-row
//! cost of a database driver (a step, a lock and an object per column), and the rows here
//! borrow their bytes from the packed values.
//!
//! - [`format`]: the packed format itself, its constants (exported to Python, which
//!   generates the query from them), its keys and lists, encoded and decoded;
//! - [`runs`]: the unpacked rows as runs of one summary's rows, cited IDs by summary, and
//!   the grouping of either read (packed or row by row) into one conversation per summary.

pub mod format;
pub mod runs;

pub use format::{source_key, turn_key, Packed, SourceColumns, TurnColumns};
pub use runs::{
    group, group_indexed, group_runs, sources, turn_runs, turn_runs_on, CurrentSummary,
};
