//! Arbitrary bytes -> a column-packed batch (the 10 turn columns and 2 source columns that
//! `ledgerfold.revalidate` reads from SQLite, as any damaged database could hand them over)
//! -> unpack, group and check.
//!
//! Checks: no panic; a packing is refused as a whole or unpacks to one row per entry of
//! every column; sources come back in position order; one verdict per summary.
#![no_main]

use arbitrary::{Result, Unstructured};
use ledgerfold_core::columns::{self, CurrentSummary, Packed, SourceColumns, TurnColumns};
use ledgerfold_core::revalidate::revalidate_many;
use libfuzzer_sys::fuzz_target;

/// A text column of `count` entries that lines up (values from a small pool so IDs collide,
/// sometimes NULL or any bytes), or, now and then, anything at all.
fn text_column(input: &mut Unstructured<'_>, count: usize) -> Result<(Vec<u8>, Vec<u8>)> {
    const POOL: [&[u8]; 6] = [b"a", b"b", b"user", b"{\"k\": \"v\"}", b"", b"\xff"];
    if input.arbitrary::<u8>()? % 16 == 0 {
        return Ok((input.arbitrary()?, input.arbitrary()?));
    }
    let (mut lengths, mut values) = (Vec::new(), Vec::new());
    for index in 0..count {
        if index > 0 {
            lengths.push(b',');
        }
        let choice: u8 = input.arbitrary()?;
        let value: Option<Vec<u8>> = match choice % 8 {
            0 => None,
            1 => Some(input.arbitrary()?),
            other => Some(POOL[usize::from(other) % POOL.len()].to_vec()),
        };
        match value {
            None => lengths.extend_from_slice(b"-1"),
            Some(value) => {
                lengths.extend_from_slice(value.len().to_string().as_bytes());
                values.extend_from_slice(&value);
            }
        }
    }
    Ok((lengths, values))
}

/// An integer column of `count` entries from `codes` (or any i64), or anything at all.
fn integer_column(input: &mut Unstructured<'_>, count: usize, codes: &[i64]) -> Result<Vec<u8>> {
    if input.arbitrary::<u8>()? % 16 == 0 {
        return input.arbitrary();
    }
    let mut out = Vec::new();
    for index in 0..count {
        if index > 0 {
            out.push(b',');
        }
        let choice: u8 = input.arbitrary()?;
        let value = match codes.get(usize::from(choice) % (codes.len() + 1)) {
            Some(code) => *code,
            None => input.arbitrary()?,
        };
        out.extend_from_slice(value.to_string().as_bytes());
    }
    Ok(out)
}

/// Source keys for the turn IDs of a text column: summary 0-3 (3 is no summary of the
/// batch), position 0-3, and the ID's length (an arbitrary entry for NULL); now and then an
/// arbitrary entry anywhere, or anything at all.
fn source_keys(input: &mut Unstructured<'_>, lengths: &[u8]) -> Result<Vec<u8>> {
    if input.arbitrary::<u8>()? % 16 == 0 {
        return input.arbitrary();
    }
    let mut out = Vec::new();
    for (index, entry) in lengths.split(|&b| b == b',').enumerate() {
        if lengths.is_empty() {
            break;
        }
        if index > 0 {
            out.push(b',');
        }
        let length = std::str::from_utf8(entry)
            .ok()
            .and_then(|text| text.parse::<u32>().ok());
        let (summary, position): (u8, u8) = (input.arbitrary()?, input.arbitrary()?);
        let key = match length {
            Some(length) if summary % 8 != 7 => {
                columns::source_key(summary % 4, u32::from(position % 4), length)
                    .unwrap_or(-1)
            }
            _ => input.arbitrary()?,
        };
        out.extend_from_slice(key.to_string().as_bytes());
    }
    Ok(out)
}

fn fuzz(data: &[u8]) -> Result<()> {
    let mut input = Unstructured::new(data);
    let rows = usize::from(input.arbitrary::<u8>()? % 12);
    let sources = usize::from(input.arbitrary::<u8>()? % 12);
    let mut texts: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for _ in 0..4 {
        texts.push(text_column(&mut input, rows)?);
    }
    texts.push(text_column(&mut input, sources)?);
    let sequence = integer_column(&mut input, rows, &[0, 1, 2, 3, -1])?;
    // Summary index * 1000 + flags: three summaries, known and unknown codes, a fourth
    // summary no batch has, a negative key.
    let turn_keys = integer_column(
        &mut input,
        rows,
        &[200, 300, 1311, 1400, 2100, 922, 2200, 3200, -1],
    )?;
    let keys = source_keys(&mut input, &texts[4].0)?;
    let packed = |at: usize| Packed {
        lengths: &texts[at].0,
        values: &texts[at].1,
    };
    let turn_columns = TurnColumns {
        keys: &turn_keys,
        id: packed(0),
        sequence: &sequence,
        body: packed(1),
        group: packed(2),
        meta: packed(3),
    };
    let source_columns = SourceColumns {
        keys: &keys,
        turn_ids: &texts[4].1,
    };
    let runs = columns::turn_runs(&turn_columns);
    if let Some(unpacked) = &runs {
        let entries = if texts[0].0.is_empty() {
            0
        } else {
            texts[0].0.split(|&b| b == b',').count()
        };
        assert_eq!(unpacked.iter().map(|(_, rows)| rows.len()).sum::<usize>(), entries);
    }
    let sources = columns::sources(&source_columns, 3);
    if let Some(sources) = &sources {
        assert_eq!(sources.len(), 3);
    }
    if let (Some(runs), Some(sources)) = (runs, sources) {
        let named = runs.iter().all(|(summary, _)| *summary < 3);
        let current: Vec<CurrentSummary<'_>> = ["c0", "c1", "c2"]
            .iter()
            .enumerate()
            .map(|(pk, conversation_id)| CurrentSummary {
                conversation_id,
                summary_pk: i64::try_from(pk).unwrap_or(0),
                summary_id: "s",
                source_fingerprint: "lf1:",
            })
            .collect();
        let grouped = columns::group_indexed(runs, sources, &current);
        assert_eq!(grouped.is_some(), named);
        if let Some(grouped) = grouped {
            let (verdicts, _) = revalidate_many(&grouped);
            assert_eq!(verdicts.len(), current.len());
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = fuzz(data);
});
