//! Which context items a chat request can carry (SPEC §17.2). Providers accept a tool
//! message only inside the block right after the assistant message whose `tool_calls`
//! names its call, and refuse an assistant message with `tool_calls` followed by anything
//! but its results. Items that would break that are left out of the chat messages (never
//! out of the ledger or the assembled context).

use std::collections::HashSet;

/// What the rule needs of one context item, in context order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatItem<'a> {
    /// A message that neither makes nor answers a call (user, system, the summary, an
    /// assistant message without calls).
    Plain,
    /// An assistant message whose `tool_calls` names these call IDs (not empty).
    Calls(Vec<&'a str>),
    /// A tool message answering this call (`None`: it names no call).
    Answer(Option<&'a str>),
}

/// An assistant message's open block: its position, the calls it made, the results so far.
struct Block {
    at: usize,
    calls: HashSet<String>,
    answers: Vec<usize>,
    answered: HashSet<String>,
}

impl Block {
    fn complete(&self) -> bool {
        self.answered.len() == self.calls.len()
    }
}

/// The rule of [`unsendable`] fed one item at a time, so a caller building the items can
/// apply it in the same pass (the context assembly does).
#[derive(Default)]
pub struct ChatRule {
    position: usize,
    dropped: Vec<usize>,
    open: Option<Block>,
}

impl ChatRule {
    /// The next item: what it makes or answers.
    pub fn push(&mut self, item: &ChatItem<'_>) {
        let position = self.position;
        self.position += 1;
        match item {
            ChatItem::Answer(call) => {
                let block = self.open.as_mut().zip(*call).filter(|(block, call)| {
                    block.calls.contains(*call) && !block.answered.contains(*call)
                });
                if let Some((block, call)) = block {
                    block.answered.insert((*call).to_owned());
                    block.answers.push(position);
                } else {
                    self.dropped.push(position);
                }
            }
            ChatItem::Plain | ChatItem::Calls(_) => {
                if let Some(block) = self.open.take() {
                    if !block.complete() {
                        self.dropped.push(block.at);
                        self.dropped.extend(block.answers);
                    }
                }
                if let ChatItem::Calls(calls) = item {
                    self.open = Some(Block {
                        at: position,
                        calls: calls.iter().map(|&call| call.to_owned()).collect(),
                        answers: Vec::new(),
                        answered: HashSet::new(),
                    });
                }
            }
        }
    }

    /// Positions (ascending) of the items pushed that chat messages leave out.
    pub fn finish(self) -> Vec<usize> {
        let mut dropped = self.dropped;
        dropped.sort_unstable();
        dropped
    }
}

/// Positions (ascending) of the items to leave out: a tool message that does not answer
/// a call of the open block (no call, a call made elsewhere or earlier, or a second answer),
/// and an assistant message whose calls are not all answered before the next message that
/// is not one of its results, together with the results it did get. A block still open at
/// the end is kept: its results may be on their way.
pub fn unsendable(items: &[ChatItem<'_>]) -> Vec<usize> {
    let mut rule = ChatRule::default();
    for item in items {
        rule.push(item);
    }
    rule.finish()
}

/// Whether a sequence is one a provider accepts (the property `unsendable` guarantees once
/// its positions are left out): every tool message answers, once, a call of the assistant
/// message that opened its block, and every block but the last is complete.
pub fn is_valid_sequence(items: &[ChatItem<'_>]) -> bool {
    unsendable(items).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChatItem::{Answer, Calls, Plain};

    #[test]
    fn complete_blocks_are_kept() {
        let items = [
            Plain,
            Calls(vec!["a", "b"]),
            Answer(Some("b")),
            Answer(Some("a")),
            Plain,
        ];
        assert!(unsendable(&items).is_empty());
    }

    #[test]
    fn orphans_duplicates_and_callless_answers_go() {
        let items = [
            Answer(Some("a")),
            Calls(vec!["a"]),
            Answer(Some("a")),
            Answer(Some("a")),
            Answer(None),
            Plain,
            Answer(Some("a")),
        ];
        assert_eq!(unsendable(&items), vec![0, 3, 4, 6]);
    }

    #[test]
    fn an_incomplete_block_goes_when_something_follows_it() {
        let items = [
            Calls(vec!["a", "b"]),
            Answer(Some("a")),
            Plain,
            Calls(vec!["c"]),
        ];
        assert_eq!(unsendable(&items), vec![0, 1]);
        // The last block may still be waiting for its results.
        let items = [Plain, Calls(vec!["c", "d"]), Answer(Some("c"))];
        assert!(unsendable(&items).is_empty());
    }

    #[test]
    fn a_call_block_interrupted_by_another_call_goes() {
        let items = [
            Calls(vec!["a"]),
            Calls(vec!["b"]),
            Answer(Some("a")),
            Answer(Some("b")),
        ];
        assert_eq!(unsendable(&items), vec![0, 2]);
    }
}
