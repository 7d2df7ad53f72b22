//! Arbitrary bytes -> stored rows (raw body bytes, any role / reason / group strings, meta JSON
//! text, colliding ids and sequences) and summaries citing anything -> `revalidate_many`; plus
//! `parse_flat_object` on arbitrary text.
//!
//! Checks: no panic; one verdict per summary, in input order; a source index never past the
//! sources; the same verdicts run twice; whatever `parse_flat_object` accepts, re-written as
//! Python's `json.dumps` would write it, reads back the same.
#![no_main]

#[path = "../../rust/core/tests/support/mod.rs"]
mod support;

use arbitrary::{Result, Unstructured};
use ledgerfold_core::fingerprint_hex;
use ledgerfold_core::meta_json::parse_flat_object;
use ledgerfold_core::revalidate::{revalidate_many, row_digest, ConversationRows, SummaryRow};
use libfuzzer_sys::fuzz_target;
use support::{python_json_dumps, write_json_object, RowSpec};

const IDS: [&str; 5] = ["a", "b", "c", "", "\0"];
const ROLES: [&str; 6] = ["system", "user", "assistant", "tool", "admin", ""];
const REASONS: [&str; 6] = [
    "pending-confirmation",
    "active-constraint",
    "audit-evidence",
    "unverified-provenance",
    "bogus",
    "",
];

/// Mostly a name from `pool` (so ids collide and roles are valid), sometimes anything.
fn pick(input: &mut Unstructured<'_>, pool: &[&str]) -> Result<String> {
    let choice: u8 = input.arbitrary()?;
    Ok(match pool.get(usize::from(choice % 8)) {
        Some(name) => (*name).to_owned(),
        None => input.arbitrary()?,
    })
}

fn row(input: &mut Unstructured<'_>) -> Result<RowSpec> {
    let sequence = if input.arbitrary()? {
        i64::from(input.arbitrary::<i8>()? % 4)
    } else {
        input.arbitrary()?
    };
    let meta_json = match input.arbitrary::<u8>()? % 4 {
        0 => None,
        1 => Some(python_json_dumps(
            &input.arbitrary::<Vec<(String, String)>>()?,
        )),
        2 => Some(write_json_object(
            &input.arbitrary::<Vec<(String, String)>>()?,
            false,
            ",",
            ":",
        )),
        _ => Some(input.arbitrary()?),
    };
    Ok(RowSpec {
        id: pick(input, &IDS)?,
        sequence,
        role: pick(input, &ROLES)?,
        body: input.arbitrary()?,
        protected: input.arbitrary()?,
        protection_reason: if input.arbitrary()? {
            Some(pick(input, &REASONS)?)
        } else {
            None
        },
        group: input.arbitrary()?,
        meta_json,
    })
}

struct Conversation {
    id: String,
    rows: Vec<RowSpec>,
    summaries: Vec<(Vec<String>, String)>,
}

fn conversation(input: &mut Unstructured<'_>) -> Result<Conversation> {
    let id = pick(input, &["c", "d"])?;
    let mut rows = Vec::new();
    for _ in 0..input.int_in_range(0..=12)? {
        rows.push(row(input)?);
    }
    let mut summaries = Vec::new();
    for _ in 0..input.int_in_range(0..=4)? {
        let mut sources = Vec::new();
        for _ in 0..input.int_in_range(0..=6)? {
            sources.push(pick(input, &IDS)?);
        }
        let fingerprint = if input.arbitrary()? {
            // Faithful over the first row of each cited id, so current verdicts happen.
            let digests: Vec<[u8; 32]> = sources
                .iter()
                .filter_map(|id| rows.iter().find(|row| &row.id == id))
                .filter_map(|row| row_digest(&row.row()))
                .collect();
            fingerprint_hex(digests.iter())
        } else {
            input.arbitrary()?
        };
        summaries.push((sources, fingerprint));
    }
    Ok(Conversation {
        id,
        rows,
        summaries,
    })
}

fn check_meta_parser(text: &str) {
    if let Some(entries) = parse_flat_object(text) {
        assert_eq!(
            parse_flat_object(&python_json_dumps(&entries)).as_ref(),
            Some(&entries),
            "parsed entries do not survive a json.dumps round trip"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        check_meta_parser(text);
    }
    let mut input = Unstructured::new(data);
    let mut conversations = Vec::new();
    while !input.is_empty() && conversations.len() < 4 {
        match conversation(&mut input) {
            Ok(conversation) => conversations.push(conversation),
            Err(_) => break,
        }
    }
    for conversation in &conversations {
        for row in &conversation.rows {
            if let Some(json) = &row.meta_json {
                check_meta_parser(json);
            }
        }
    }
    let borrowed: Vec<ConversationRows<'_>> = conversations
        .iter()
        .map(|conversation| ConversationRows {
            conversation_id: &conversation.id,
            turns: conversation.rows.iter().map(RowSpec::row).collect(),
            summaries: conversation
                .summaries
                .iter()
                .map(|(sources, fingerprint)| SummaryRow {
                    summary_id: "s",
                    source_ids: sources.iter().map(String::as_str).collect(),
                    source_fingerprint: fingerprint,
                })
                .collect(),
        })
        .collect();
    let (verdicts, totals) = revalidate_many(&borrowed);
    let mut expected = Vec::new();
    for (c, conversation) in conversations.iter().enumerate() {
        for s in 0..conversation.summaries.len() {
            expected.push((c, s));
        }
    }
    let got: Vec<(usize, usize)> = verdicts
        .iter()
        .map(|v| (v.conversation, v.summary))
        .collect();
    assert_eq!(got, expected, "verdicts out of order");
    for verdict in &verdicts {
        let sources = conversations[verdict.conversation].summaries[verdict.summary]
            .0
            .len();
        assert!(verdict.source_index.is_none_or(|index| index <= sources));
    }
    assert_eq!(
        revalidate_many(&borrowed),
        (verdicts, totals),
        "not deterministic"
    );
});
