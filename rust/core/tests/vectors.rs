//! Every case of the golden vectors (`tests/data/fingerprint-v1-vectors.json`) must match
//! byte for byte: encoding, digest and fingerprint.

use std::path::PathBuf;

use ledgerfold_core::fingerprint::to_fingerprint_string;
use ledgerfold_core::model::normalise_meta;
use ledgerfold_core::{
    encode_turn, fingerprint_hex, turn_digest, ExtendableFingerprint, ProtectionReason, Role,
    TurnRef,
};
use serde_json::Value;

/// The repository's copy of the golden vectors (`tests/data/`, checked against the spec's
/// by pytest when the spec is beside the checkout).
fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fingerprint-v1-vectors.json")
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[test]
fn golden_vectors_match() {
    let path = vectors_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["format"], "ledgerfold fingerprint v1");
    let cases = doc["cases"].as_array().unwrap();
    assert!(
        cases.len() >= 14,
        "expected every golden case, found {}",
        cases.len()
    );
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut digests = Vec::new();
        for turn in case["turns"].as_array().unwrap() {
            let mut meta: Vec<(String, String)> = turn["meta"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            normalise_meta(&mut meta).unwrap();
            let view = TurnRef {
                id: turn["id"].as_str().unwrap(),
                sequence: turn["sequence"].as_i64().unwrap(),
                role: Role::parse(turn["role"].as_str().unwrap()).unwrap(),
                protected: turn["protected"].as_bool().unwrap(),
                protection_reason: turn["protection_reason"]
                    .as_str()
                    .map(|r| ProtectionReason::parse(r).unwrap()),
                group: turn["group"].as_str(),
                meta: &meta,
                body: turn["body"].as_str().unwrap(),
            };
            assert_eq!(
                hex(&encode_turn(&view)),
                turn["encoding_hex"].as_str().unwrap(),
                "{name}: encoding"
            );
            let digest = turn_digest(&view);
            assert_eq!(
                hex(&digest),
                turn["digest_hex"].as_str().unwrap(),
                "{name}: digest"
            );
            digests.push(digest);
        }
        assert_eq!(
            fingerprint_hex(digests.iter()),
            case["fingerprint"].as_str().unwrap(),
            "{name}: fingerprint"
        );
        // The extendable state gives the same fingerprint, whole and split at every point.
        let packed: Vec<u8> = digests.iter().flatten().copied().collect();
        for split in 0..=digests.len() {
            let state = ExtendableFingerprint::new(&packed[..split * 32]);
            assert_eq!(
                to_fingerprint_string(&state.fingerprint(&packed[split * 32..])),
                case["fingerprint"].as_str().unwrap(),
                "{name}: extendable fingerprint split at {split}"
            );
        }
    }
}
