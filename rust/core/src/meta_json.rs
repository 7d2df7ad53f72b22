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
        let mut out = String::new();
        loop {
            // Copy the run of plain bytes up to the next quote or backslash at once.
            let start = self.at;
            while let Some(&byte) = self.bytes().get(self.at) {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.at += 1;
            }
            // Runs end at ASCII bytes (or the end), so both ends are character boundaries.
            out.push_str(self.text.get(start..self.at)?);
            match *self.bytes().get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(out);
                }
                b'\\' => {
                    self.at += 1;
                    let escape = *self.bytes().get(self.at)?;
                    self.at += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return None,
                    }
                }
                _ => return None, // a raw control character
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
    use super::parse_flat_object;

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
