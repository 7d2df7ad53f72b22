//! The stored form of `meta`: a flat JSON object of strings (what `json.dumps` writes), parsed
//! without a JSON dependency so batch revalidation can read rows without Python.

/// Parses `{"key": "value", ...}`; anything else (nesting, numbers, bad escapes, trailing
/// bytes) is `None`. Entries come back in document order.
pub fn parse_flat_object(text: &str) -> Option<Vec<(String, String)>> {
    let mut parser = Parser { text, at: 0 };
    let entries = parser.object()?;
    parser.skip_space();
    (parser.at == parser.bytes().len()).then_some(entries)
}

/// The index of the first byte at or after `at` that ends a run of plain string bytes (a
/// quote, a backslash or a control character), or the length: eight bytes per step.
fn special(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_le_bytes([0x20; 8]);
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        // A byte's high bit is set where it is zero (after the XOR) or below 0x20; only
        // bytes above the first real hit can be false hits (a borrow), and the lowest set
        // bit is taken.
        let quote = word ^ QUOTES;
        let backslash = word ^ BACKSLASHES;
        let hits = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | word.wrapping_sub(SPACES) & !word)
            & HIGH;
        if hits != 0 {
            return at + (hits.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&byte) = bytes.get(at) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            break;
        }
        at += 1;
    }
    at.min(bytes.len())
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_space(&mut self) {
        while matches!(
            self.bytes().get(self.at),
            Some(b' ' | b'\t' | b'\n' | b'\r')
        ) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (self.bytes().get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    fn object(&mut self) -> Option<Vec<(String, String)>> {
        self.eat(b'{')?;
        let mut entries = Vec::new();
        if self.eat(b'}').is_some() {
            return Some(entries);
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            let value = self.string()?;
            entries.push((key, value));
            if self.eat(b',').is_none() {
                self.eat(b'}')?;
                return Some(entries);
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.at..self.at + 4)?;
        self.at += 4;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(text, 16).ok()
    }

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let (bytes, start) = (self.bytes(), self.at);
        let mut at = special(bytes, start);
        // Runs end at ASCII bytes (or the end), so both ends are character boundaries.
        let mut out = String::with_capacity(at - start + 16);
        out.push_str(self.text.get(start..at)?);
        // Stored meta is what `json.dumps` writes: tool calls nest JSON in strings, so often
        // an escape every few bytes, and escapes side by side.
        loop {
            match *bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(out);
                }
                b'\\' => {
                    let escape = *bytes.get(at + 1)?;
                    at += 2;
                    out.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            self.at = at;
                            let character = self.unicode_escape()?;
                            at = self.at;
                            character
                        }
                        _ => return None,
                    });
                }
                _ => return None, // a raw control character
            }
            if !matches!(bytes.get(at), Some(b'"' | b'\\')) {
                let plain = special(bytes, at);
                out.push_str(self.text.get(at..plain)?);
                at = plain;
            }
        }
    }

    /// `\uXXXX`, joining a surrogate pair; a lone surrogate is not valid text here.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            if self.bytes().get(self.at..self.at + 2)? != b"\\u" {
                return None;
            }
            self.at += 2;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return None;
            }
            return char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00));
        }
        char::from_u32(first)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_flat_object, special};
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time scan finds what a byte-at-a-time one does, wherever it starts
        /// (hits in every lane, false hits above a real one, bytes >= 0x80).
        #[test]
        fn special_finds_the_first_quote_backslash_or_control_byte(
            bytes in proptest::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), Just(0x1f), Just(b' '), Just(b'!'), 0u8..0x20,
                    0x20u8..=0xff,
                ], 0..40),
            from in 0usize..44,
        ) {
            let naive = (from..bytes.len())
                .find(|&at| matches!(bytes[at], b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(bytes.len());
            prop_assert_eq!(special(&bytes, from), naive);
        }
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_what_python_json_dumps_writes() {
        assert_eq!(parse_flat_object("{}"), Some(vec![]));
        assert_eq!(
            parse_flat_object(r#"{"tool_call_id": "c1", "name": "a\"b\\c\n\u00e9\ud83d\ude00"}"#),
            Some(pairs(&[("tool_call_id", "c1"), ("name", "a\"b\\c\né😀")]))
        );
        assert_eq!(
            parse_flat_object(" { \"k\" :\"v\" } "),
            Some(pairs(&[("k", "v")]))
        );
        assert_eq!(
            parse_flat_object("{\"k\":\"中文\"}"),
            Some(pairs(&[("k", "中文")]))
        );
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "[]",
            "{",
            "{\"k\"}",
            "{\"k\":1}",
            "{\"k\":\"v\",}",
            "{\"k\":\"v\"} x",
            "{\"k\":\"\\ud800\"}",
            "{\"k\":\"\\x\"}",
            "{\"k\":\"a\u{1}\"}",
            "{\"k\":{\"a\":\"b\"}}",
            "{\"k\":\"\\u12\"}",
        ] {
            assert_eq!(parse_flat_object(bad), None, "{bad:?}");
        }
    }
}
