//! Which context items a chat request can carry, and in what order (SPEC §17.2). Providers
//! accept a tool message only inside the block right after the assistant message whose
//! `tool_calls` names its call, and refuse an assistant message with `tool_calls` followed
//! by anything but its results. A result that arrived after other messages (a user
//! interjecting before a tool returned) is moved up to its call's block, so nothing the
//! ledger answered is lost; only items that cannot be made valid (a call whose results are
//! missing while later messages follow, a result without its call) are left out of the
//! chat messages (never out of the ledger or the assembled context).

use std::collections::{HashMap, HashSet};

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

/// An assistant message's block: its position, the calls it made, the results so far.
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

/// The rule of [`unsendable`] and [`chat_order`] fed one item at a time, so a caller
/// building the items can apply it in the same pass (the context assembly does).
///
/// A result answers the nearest call of its ID before it (the unit rule's pairing), once:
/// it joins that call's block wherever it lies, and is sent right after the block's other
/// results. A block whose calls are not all answered is left out with the results it got,
/// unless it is the last block and only results follow it (they may be on their way).
#[derive(Default)]
pub struct ChatRule {
    position: usize,
    dropped: Vec<usize>,
    blocks: Vec<Block>,
    /// The block of the last item that was not a result, if it made calls.
    open: Option<usize>,
    /// Each call ID's nearest maker so far (an index into `blocks`).
    maker: HashMap<String, usize>,
    /// Whether a result joined a block other than the open one (the order changes).
    moved: bool,
}

impl ChatRule {
    /// The next item: what it makes or answers.
    pub fn push(&mut self, item: &ChatItem<'_>) {
        let position = self.position;
        self.position += 1;
        match item {
            ChatItem::Answer(call) => {
                let joined = call.and_then(|call| {
                    let index = *self.maker.get(call)?;
                    let block = &mut self.blocks[index];
                    if block.answered.contains(call) {
                        return None; // a second result for one call
                    }
                    block.answered.insert(call.to_owned());
                    block.answers.push(position);
                    Some(index)
                });
                match joined {
                    Some(index) => self.moved |= self.open != Some(index),
                    None => self.dropped.push(position),
                }
            }
            ChatItem::Plain => self.open = None,
            ChatItem::Calls(calls) => {
                let index = self.blocks.len();
                for &call in calls {
                    self.maker.insert(call.to_owned(), index);
                }
                self.blocks.push(Block {
                    at: position,
                    calls: calls.iter().map(|&call| call.to_owned()).collect(),
                    answers: Vec::new(),
                    answered: HashSet::new(),
                });
                self.open = Some(index);
            }
        }
    }

    /// Positions (ascending) of the items pushed that chat messages leave out.
    pub fn finish(self) -> Vec<usize> {
        self.left_out()
    }

    /// The positions chat messages carry, in the order they are sent; `None` when that is
    /// every item in context order (nothing left out, nothing moved).
    pub fn finish_order(self) -> Option<Vec<usize>> {
        let dropped = self.left_out();
        if !self.moved && dropped.is_empty() {
            return None;
        }
        let mut skip = vec![false; self.position];
        for &at in &dropped {
            skip[at] = true;
        }
        // Each kept block's results, sent right after its message (and only there).
        let mut results: HashMap<usize, Vec<usize>> = HashMap::new();
        for block in self.blocks {
            if skip[block.at] || block.answers.is_empty() {
                continue;
            }
            for &at in &block.answers {
                skip[at] = true;
            }
            results.insert(block.at, block.answers);
        }
        let mut order = Vec::with_capacity(self.position - dropped.len());
        for (at, &skipped) in skip.iter().enumerate() {
            if skipped {
                continue;
            }
            order.push(at);
            if let Some(answers) = results.get(&at) {
                order.extend(answers);
            }
        }
        Some(order)
    }

    /// Positions (ascending) left out: results answering no call, and each incomplete
    /// block but the open one at the end, with the results it got.
    fn left_out(&self) -> Vec<usize> {
        let mut dropped = self.dropped.clone();
        for (index, block) in self.blocks.iter().enumerate() {
            if !block.complete() && self.open != Some(index) {
                dropped.push(block.at);
                dropped.extend(&block.answers);
            }
        }
        dropped.sort_unstable();
        dropped
    }
}

/// Positions (ascending) of the items to leave out: a tool message that answers no call
/// (no call of its ID before it, or a second answer to the nearest one), and an assistant
/// message whose calls are not all answered, together with the results it did get (a
/// block is kept while it is the last and only results follow it: they may be on their
/// way).
pub fn unsendable(items: &[ChatItem<'_>]) -> Vec<usize> {
    let mut rule = ChatRule::default();
    for item in items {
        rule.push(item);
    }
    rule.finish()
}

/// The positions of the items chat messages carry, in the order they are sent: context
/// order, but for the [`unsendable`] items, left out, and each result, sent right after
/// its call's message with the call's other results (in context order). `None`: every
/// item, in context order.
pub fn chat_order(items: &[ChatItem<'_>]) -> Option<Vec<usize>> {
    let mut rule = ChatRule::default();
    for item in items {
        rule.push(item);
    }
    rule.finish_order()
}

/// Whether a sequence is one a provider accepts as it is (what [`chat_order`] makes of any
/// items): every tool message answers, once, a call of the assistant message that opened
/// its block, and every block but the last is complete.
pub fn is_valid_sequence(items: &[ChatItem<'_>]) -> bool {
    chat_order(items).is_none()
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
    fn a_result_after_other_messages_joins_its_call() {
        // A user interjecting before the tool returned: the result is sent with its call.
        let items = [Plain, Calls(vec!["a"]), Plain, Answer(Some("a")), Plain];
        assert!(unsendable(&items).is_empty());
        assert_eq!(chat_order(&items), Some(vec![0, 1, 3, 2, 4]));
        // Another call in between: each result goes to its own call's block.
        let items = [
            Calls(vec!["a"]),
            Calls(vec!["b"]),
            Answer(Some("a")),
            Answer(Some("b")),
        ];
        assert!(unsendable(&items).is_empty());
        assert_eq!(chat_order(&items), Some(vec![0, 2, 1, 3]));
        // A result answers the nearest call of its ID: the earlier call stays unanswered.
        let items = [Calls(vec!["a"]), Plain, Calls(vec!["a"]), Answer(Some("a"))];
        assert_eq!(unsendable(&items), vec![0]);
        assert_eq!(chat_order(&items), Some(vec![1, 2, 3]));
        // A valid sequence is sent as it is.
        let items = [Plain, Calls(vec!["a"]), Answer(Some("a")), Plain];
        assert_eq!(chat_order(&items), None);
        assert!(is_valid_sequence(&items));
    }
}
