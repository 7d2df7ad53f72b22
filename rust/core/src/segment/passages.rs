//! The index's side of segmentation (SPEC §16.5 "Hits"): a body's passages of at most
//! [`PASSAGE_CHARS`] characters, each with its tokens.

use super::tokenise::with_tokeniser;

/// A passage's window, in characters (code points).
pub const PASSAGE_CHARS: usize = 600;

/// One passage of a body: `start..end` in characters (code points) of the body, and its
/// tokens in order joined by single spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    pub start: usize,
    pub end: usize,
    pub tokens: String,
}

/// The body's passages that hold at least one token, in order (SPEC §16.5 "Hits").
pub fn index_passages(body: &str) -> Vec<Passage> {
    let mut passages = Vec::new();
    let mut tokens = Vec::new();
    with_tokeniser(|tokeniser| {
        for bounds in passage_bounds(body) {
            tokens.clear();
            tokeniser.push_tokens(&body[bounds.start_byte..bounds.end_byte], &mut tokens);
            if !tokens.is_empty() {
                passages.push(Passage {
                    start: bounds.start_char,
                    end: bounds.end_char,
                    tokens: std::str::from_utf8(&tokens)
                        .expect("tokens are UTF-8")
                        .to_owned(),
                });
            }
        }
    });
    passages
}

/// A passage's place in the body, in bytes (to slice the `str`) and in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassageBounds {
    pub start_byte: usize,
    pub end_byte: usize,
    pub start_char: usize,
    pub end_char: usize,
}

fn is_sentence_end(c: char) -> bool {
    matches!(
        c,
        '.' | '!' | '?' | '。' | '！' | '？' | '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}'
    ) || c == '\u{2028}'
        || c == '\u{2029}'
}

/// Every passage of the body, token-free ones included: consecutive, covering the body.
///
/// From `start` the window is the next 600 characters; when the rest of the body fits, it
/// is the last passage; else the passage ends after the last sentence end (`. ! ? 。！？`
/// or a line break) among the window's last 300 characters, else after the window's last
/// whitespace (Unicode `White_Space`), else after 600 characters.
pub fn passage_bounds(body: &str) -> Vec<PassageBounds> {
    let mut out = Vec::new();
    let (mut start_byte, mut start_char) = (0usize, 0usize);
    while start_byte < body.len() {
        let rest = &body[start_byte..];
        let (bytes, chars) = if rest.len() <= PASSAGE_CHARS {
            // No more characters than bytes: the rest fits, the last passage.
            (rest.len(), rest.chars().count())
        } else {
            passage_end(rest)
        };
        out.push(PassageBounds {
            start_byte,
            end_byte: start_byte + bytes,
            start_char,
            end_char: start_char + chars,
        });
        start_byte += bytes;
        start_char += chars;
    }
    out
}

/// `(bytes, chars)` of the passage at the start of `rest` (see [`passage_bounds`]).
fn passage_end(rest: &str) -> (usize, usize) {
    let window = &rest.as_bytes()[..rest.len().min(PASSAGE_CHARS + 1)];
    if window.is_ascii() {
        if window.len() <= PASSAGE_CHARS {
            // The rest of the body fits: the last passage.
            return (rest.len(), rest.len());
        }
        // One byte a character: the last sentence end of the second half, else the last
        // whitespace, found from the window's end.
        let window = &window[..PASSAGE_CHARS];
        let end = window[PASSAGE_CHARS / 2..]
            .iter()
            .rposition(|&byte| is_sentence_end(char::from(byte)))
            .map(|at| PASSAGE_CHARS / 2 + at)
            .or_else(|| {
                window
                    .iter()
                    .rposition(|&byte| char::from(byte).is_whitespace())
            })
            .map_or(PASSAGE_CHARS, |at| at + 1);
        return (end, end);
    }
    // (byte offset after, chars after) of the candidates, relative to `rest`.
    let mut sentence_end: Option<(usize, usize)> = None;
    let mut whitespace: Option<(usize, usize)> = None;
    for (count, (offset, c)) in rest.char_indices().enumerate() {
        if count == PASSAGE_CHARS {
            return sentence_end.or(whitespace).unwrap_or((offset, count));
        }
        let after = (offset + c.len_utf8(), count + 1);
        if count >= PASSAGE_CHARS / 2 && is_sentence_end(c) {
            sentence_end = Some(after);
        }
        if c.is_whitespace() {
            whitespace = Some(after);
        }
    }
    // The rest of the body fits: the last passage.
    (rest.len(), rest.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passages_end_at_sentences_then_whitespace_then_600() {
        let sentence = "word ".repeat(70) + "end. "; // 355 characters
        let body = sentence.repeat(3);
        let bounds = passage_bounds(&body);
        assert_eq!(bounds[0].end_char, 355 - 1); // after the '.', before its space
        let spaced = "abcdefghi ".repeat(100);
        assert_eq!(passage_bounds(&spaced)[0].end_char, 600);
        let dense = "x".repeat(1_000);
        assert_eq!(passage_bounds(&dense)[0].end_char, 600);
        let early = format!("a. {}", "y".repeat(1_000));
        // A sentence end in the first half does not count; no whitespace after it either.
        assert_eq!(passage_bounds(&early)[0].end_char, 3);
    }

    #[test]
    fn passage_offsets_count_characters() {
        let body = "é".repeat(700);
        let bounds = passage_bounds(&body);
        assert_eq!(bounds.len(), 2);
        assert_eq!((bounds[0].start_char, bounds[0].end_char), (0, 600));
        assert_eq!((bounds[0].start_byte, bounds[0].end_byte), (0, 1200));
        assert_eq!((bounds[1].start_char, bounds[1].end_char), (600, 700));
    }
}
