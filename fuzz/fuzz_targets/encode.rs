//! Arbitrary bytes -> turn fields -> canonical encoding and digest.
//!
//! Checks, for every input: the encoding equals the independent SPEC §3 encoder, decodes back
//! to the same turn (injectivity), hashes to `derive_key("ledgerfold v1 turn", encoding)`
//! whether streamed or buffered, twice the same; two turns encode equally only when equal;
//! and the raw input, whenever the test decoder accepts it, is exactly the encoding of what
//! it decoded to (the decoder accepts canonical encodings only).
#![no_main]

#[path = "../../rust/core/tests/support/mod.rs"]
mod support;

use arbitrary::{Result, Unstructured};
use ledgerfold_core::encoding::{encode_turn_into, TURN_CONTEXT};
use ledgerfold_core::model::normalise_meta;
use ledgerfold_core::{encode_turn, turn_digest, ProtectionReason, Role};
use libfuzzer_sys::fuzz_target;
use support::{decode_turn, spec_encoding, OwnedTurn};

fn arbitrary_turn(input: &mut Unstructured<'_>) -> Result<OwnedTurn> {
    let mut id: String = input.arbitrary()?;
    if id.is_empty() {
        id.push('\0');
    }
    let sequence: i64 = input.arbitrary()?;
    // `!x` maps the negative half onto the non-negative one, so every i64 >= 0 is reachable.
    let sequence = if sequence < 0 { !sequence } else { sequence };
    let role = Role::ALL[usize::from(input.arbitrary::<u8>()? % 4)];
    let protected: bool = input.arbitrary()?;
    let reason_code: u8 = input.arbitrary::<u8>()? % 5;
    let protection_reason = if protected && reason_code > 0 {
        Some(ProtectionReason::ALL[usize::from(reason_code - 1)])
    } else {
        None
    };
    let group: Option<String> = input
        .arbitrary::<Option<String>>()?
        .filter(|g| !g.is_empty());
    let mut meta: Vec<(String, String)> = input.arbitrary()?;
    meta.retain(|(key, _)| !key.is_empty());
    meta.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    meta.dedup_by(|a, b| a.0 == b.0);
    normalise_meta(&mut meta).expect("deduplicated non-empty keys");
    let body: String = input.arbitrary()?;
    Ok(OwnedTurn {
        id,
        sequence,
        role,
        protected,
        protection_reason,
        group,
        meta,
        body,
    })
}

fn check_turn(turn: &OwnedTurn) {
    let view = turn.view();
    let bytes = encode_turn(&view);
    assert_eq!(bytes, spec_encoding(turn), "encoder differs from SPEC §3");
    assert_eq!(
        decode_turn(&bytes).as_ref(),
        Ok(turn),
        "decode(encode(t)) != t"
    );
    let digest = turn_digest(&view);
    assert_eq!(digest, blake3::derive_key(TURN_CONTEXT, &bytes));
    let mut hasher = blake3::Hasher::new_derive_key(TURN_CONTEXT);
    encode_turn_into(&view, &mut hasher);
    assert_eq!(*hasher.finalize().as_bytes(), digest);
    assert_eq!(turn_digest(&view), digest, "digest not deterministic");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(decoded) = decode_turn(data) {
        assert!(decoded.is_valid());
        assert_eq!(
            encode_turn(&decoded.view()),
            data,
            "decoder accepted non-canonical bytes"
        );
    }
    let mut input = Unstructured::new(data);
    let Ok(first) = arbitrary_turn(&mut input) else {
        return;
    };
    check_turn(&first);
    if let Ok(second) = arbitrary_turn(&mut input) {
        check_turn(&second);
        assert_eq!(
            first == second,
            encode_turn(&first.view()) == encode_turn(&second.view()),
            "distinct turns share an encoding"
        );
    }
});
