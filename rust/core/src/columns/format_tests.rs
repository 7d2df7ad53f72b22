//! Unit tests of the packed format (`format.rs`).

use super::*;

/// `(summary index, row)` for every packed turn row, in packed order.
fn turn_rows<'a>(columns: &TurnColumns<'a>) -> Option<Vec<(usize, TurnRow<'a>)>> {
    let entries = TurnEntries::unpack(columns, Exec::Inline)?;
    (0..entries.len())
        .map(|index| Some((entries.summary(index), entries.row(index)?)))
        .collect()
}

fn packed<'a>(lengths: &'a str, values: &'a str) -> Packed<'a> {
    Packed {
        lengths: lengths.as_bytes(),
        values: values.as_bytes(),
    }
}

fn two_rows() -> TurnColumns<'static> {
    TurnColumns {
        keys: b"200,311",
        id: packed("1,2", "abb"),
        sequence: b"1,2",
        body: packed("0,3", ",x,"),
        group: packed("-1,-1", ""),
        meta: packed("-1,9", r#"{"k":"v"}"#),
    }
}

#[test]
fn rows_unpack_in_order_with_nulls() {
    let rows = turn_rows(&two_rows()).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].0, rows[1].0), (0, 0));
    assert_eq!(rows[0].1.id, "a");
    assert_eq!(rows[0].1.body, b"");
    assert_eq!(rows[0].1.role, "user");
    assert!(!rows[0].1.protected);
    assert_eq!(rows[0].1.meta_json, None);
    assert_eq!(rows[1].1.id, "bb");
    assert_eq!(rows[1].1.sequence, 2);
    assert_eq!(rows[1].1.body, b",x,");
    assert_eq!(rows[1].1.role, "assistant");
    assert!(rows[1].1.protected);
    assert_eq!(rows[1].1.protection_reason, Some("pending-confirmation"));
    assert_eq!(rows[1].1.meta_json, Some(r#"{"k":"v"}"#));
}

#[test]
fn empty_columns_are_no_rows() {
    assert_eq!(turn_rows(&TurnColumns::default()).unwrap().len(), 0);
    let mut visited = 0;
    visit_sources(&SourceColumns::default(), |_, _, _| {
        visited += 1;
        Some(())
    })
    .unwrap();
    assert_eq!(visited, 0);
}

#[test]
fn packings_that_do_not_line_up_are_refused() {
    let base = two_rows();
    let cases = [
        TurnColumns {
            sequence: b"1",
            ..base
        },
        TurnColumns {
            body: packed("0,2", ",x,"),
            ..base
        },
        TurnColumns {
            body: packed("0,4", ",x,"),
            ..base
        },
        TurnColumns {
            id: packed("1,x", "abb"),
            ..base
        },
        TurnColumns {
            id: packed("-1,3", "abb"),
            ..base
        },
        TurnColumns {
            keys: b"200",
            ..base
        },
        TurnColumns {
            keys: b"200,x",
            ..base
        },
        TurnColumns {
            keys: b"200,-311",
            ..base
        },
        TurnColumns {
            keys: b"200,",
            ..base
        },
    ];
    for columns in cases {
        assert!(turn_rows(&columns).is_none(), "{columns:?}");
    }
}

#[test]
fn unreadable_fields_make_invalid_rows() {
    let base = two_rows();
    let cases = [
        TurnColumns {
            sequence: b"1,2.5",
            ..base
        },
        TurnColumns {
            keys: b"200,911",
            ..base
        },
        TurnColumns {
            keys: b"200,391",
            ..base
        },
        TurnColumns {
            keys: b"200,319",
            ..base
        },
        TurnColumns {
            meta: Packed {
                lengths: b"-1,1",
                values: b"\xff",
            },
            ..base
        },
        TurnColumns {
            group: Packed {
                lengths: b"-1,1",
                values: b"\xff",
            },
            ..base
        },
        TurnColumns {
            body: packed("0,-1", ""),
            ..base
        },
    ];
    for columns in cases {
        let rows = turn_rows(&columns).unwrap();
        assert!(crate::revalidate::row_digest(&rows[0].1).is_some());
        assert!(
            crate::revalidate::row_digest(&rows[1].1).is_none(),
            "{columns:?}"
        );
    }
}

#[test]
fn integers_parse_as_sqlite_writes_them() {
    for (text, value) in [
        ("0", Some(0)),
        ("-1", Some(-1)),
        ("42", Some(42)),
        ("9223372036854775807", Some(i64::MAX)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("9223372036854775808", None),
        ("", None),
        ("-", None),
        ("1.5", None),
        ("+1", None),
        (" 1", None),
        ("x", None),
    ] {
        assert_eq!(integer(text.as_bytes()), value, "{text}");
    }
}

#[test]
fn every_flag_code_round_trips() {
    for summary in [0, 1, MAX_SUMMARIES - 1] {
        for role in Role::ALL {
            for protected in [false, true] {
                for reason in [None].into_iter().chain(ProtectionReason::ALL.map(Some)) {
                    let key = turn_key(
                        summary,
                        i64::from(role.code()),
                        i64::from(protected),
                        reason.map_or(0, |reason| i64::from(reason.code())),
                    )
                    .unwrap();
                    let (index, flags) = split_key(key).unwrap();
                    assert_eq!(index, summary);
                    assert_eq!(
                        decode_flags(flags),
                        Some((
                            role.as_str(),
                            protected,
                            reason.map(ProtectionReason::as_str)
                        ))
                    );
                }
            }
        }
    }
}

#[test]
fn unknown_digits_decode_to_nothing() {
    for (role, protected, reason) in [
        (UNKNOWN_CODE, 0, 0),
        (2, UNKNOWN_CODE, 0),
        (2, 1, UNKNOWN_CODE),
        (0, 0, 0),
    ] {
        let key = turn_key(0, role, protected, reason).unwrap();
        assert_eq!(decode_flags(split_key(key).unwrap().1), None, "{key}");
    }
    assert_eq!(turn_key(0, 10, 0, 0), None);
    assert_eq!(turn_key(0, 2, -1, 0), None);
}

#[test]
fn turn_keys_are_the_documented_decimals() {
    // The form the query writes: summary, then one digit each.
    assert_eq!(turn_key(12, 3, 1, 4), Some(12_314));
    assert_eq!(split_key(-1), None);
}

#[test]
fn source_keys_round_trip_within_their_ranges() {
    let top_position = (1 << SOURCE_POSITION_BITS) - 1;
    let top_length = (1 << SOURCE_ID_LENGTH_BITS) - 1;
    for (summary, position, len) in [(0, 0, 0), (255, top_position, top_length), (7, 3, 40)] {
        let key = source_key(summary, position, len).unwrap();
        assert!(key >= 0);
        assert_eq!(
            split_source_key(key),
            Some((usize::from(summary), i64::from(position), len as usize))
        );
    }
    assert_eq!(source_key(0, 1 << 28, 0), None);
    assert_eq!(source_key(0, 0, 1 << 26), None);
    assert_eq!(split_source_key(-1), None);
}
