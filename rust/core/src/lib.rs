//! ledgerfold-core: the byte-exact parts of ledgerfold, with no knowledge of Python.
//!
//! - [`encoding`]: the canonical turn encoding and turn digest of SPEC §3;
//! - [`fingerprint`]: the list fingerprint `lf1:<hex>` over turn digests;
//! - [`ids`]: ordered-ID comparison and duplicate detection;
//! - [`plan`], [`check`], [`assemble`]: compaction planning, summary validity and context
//!   layout over turns already ordered by sequence;
//! - [`segment`]: recall's passages and search tokens (SPEC §16.5);
//! - [`units`]: the compaction units every rule keeps together (groups and tool calls);
//! - [`shared_seq`]: the frozen source-ID sequence an extension shares with its parent;
//! - [`chat`]: which context items a chat request can carry (tool-call sequences);

#![forbid(unsafe_code)]

pub mod assemble;
pub mod chat;
pub mod check;
pub mod columns;
pub mod encoding;
pub mod error;
pub mod exec;
pub mod extend;
pub mod fingerprint;
pub mod ids;
pub mod meta_json;
pub mod model;
pub mod plan;
pub mod revalidate;
pub mod segment;
pub mod shared_seq;
pub mod units;

pub use encoding::{encode_turn, turn_digest, TurnRef};
pub use error::{CoreError, Problem};
pub use exec::Exec;
pub use extend::ExtendableFingerprint;
pub use fingerprint::{fingerprint_digests, fingerprint_hex, Fingerprinter};
pub use model::{ProtectionReason, Role};
