//! Compaction units (SPEC §17.2): the sets of turns that planning, the `group-split` check,
//! folding, purging and the chat adapter keep together. A unit is the transitive closure
//! of two links: turns sharing a `group`, and an assistant turn whose `tool_calls` names a
//! call with every tool turn whose `tool_call_id` answers it, whatever their groups. A
//! result answers the nearest call of its ID before it (else the first after it), so a call
//! ID a model uses again pairs each result with its own call ([`answer_makers`]).

use std::collections::HashMap;

use crate::model::Role;

/// What the unit rule needs of one turn. `calls` are the call IDs an assistant turn's
/// `tool_calls` names (empty for other roles); `answers` is the call a tool turn answers.
#[derive(Clone, Debug, Default)]
pub struct UnitMember<'a> {
    pub group: Option<&'a str>,
    pub calls: Vec<&'a str>,
    pub answers: Option<&'a str>,
}

/// For each position, the maker its `answers` is paired with (SPEC §17.2, "every tool turn
/// whose `tool_call_id` answers it"): a result answers the nearest member before it whose
/// `calls` names its call, else (a result stored before its call) the first one after it.
/// A call ID used again later (a model numbering its calls `call_0`, `call_1`, … in every
/// response) thus pairs each result with its own call, as a chat request pairs them.
/// `None` for a member that answers nothing, or a call no member makes.
pub fn answer_makers(members: &[UnitMember<'_>]) -> Vec<Option<usize>> {
    let mut makers: Vec<Option<usize>> = vec![None; members.len()];
    // Forward: the newest maker of each call so far, read before a member's own calls count.
    let mut newest: HashMap<&str, usize> = HashMap::new();
    let mut unpaired = false;
    for (position, member) in members.iter().enumerate() {
        if let Some(call) = member.answers {
            makers[position] = newest.get(call).copied();
            unpaired |= makers[position].is_none();
        }
        for &call in &member.calls {
            newest.insert(call, position);
        }
    }
    if unpaired {
        // Backward: the nearest maker after each result that none before it made.
        let mut next: HashMap<&str, usize> = HashMap::new();
        for (position, member) in members.iter().enumerate().rev() {
            if let Some(call) = member.answers {
                if makers[position].is_none() {
                    makers[position] = next.get(call).copied();
                }
            }
            for &call in &member.calls {
                next.insert(call, position);
            }
        }
    }
    makers
}

/// Positions (ascending) of the members with a call that no result is paired with
/// ([`answer_makers`]): an open call (SPEC §15.3), whose turn stays raw. A call named twice
/// by one member counts once.
pub fn open_makers(members: &[UnitMember<'_>]) -> Vec<usize> {
    let mut answered: std::collections::HashSet<(usize, &str)> = std::collections::HashSet::new();
    for (member, maker) in members.iter().zip(answer_makers(members)) {
        if let (Some(call), Some(maker)) = (member.answers, maker) {
            answered.insert((maker, call));
        }
    }
    members
        .iter()
        .enumerate()
        .filter(|(position, member)| {
            member
                .calls
                .iter()
                .any(|&call| !answered.contains(&(*position, call)))
        })
        .map(|(position, _)| position)
        .collect()
}

/// For each position, its unit's root: the smallest position in the unit. Two turns are in
/// one unit exactly when their roots are equal; a turn linked to nothing is its own root.
/// The links: members sharing a `group`, and each result with the call it is paired with
/// ([`answer_makers`]), merged transitively.
pub fn unit_roots(members: &[UnitMember<'_>]) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..members.len()).collect();
    // The first position seen for each group; later members are merged into it.
    let mut by_group: HashMap<&str, usize> = HashMap::new();
    for (position, member) in members.iter().enumerate() {
        if let Some(group) = member.group {
            let first = *by_group.entry(group).or_insert(position);
            union(&mut parent, first, position);
        }
    }
    for (position, maker) in answer_makers(members).into_iter().enumerate() {
        if let Some(maker) = maker {
            union(&mut parent, maker, position);
        }
    }
    (0..members.len()).map(|at| find(&mut parent, at)).collect()
}

fn find(parent: &mut [usize], mut at: usize) -> usize {
    let mut root = at;
    while parent[root] != root {
        root = parent[root];
    }
    while parent[at] != root {
        let next = parent[at];
        parent[at] = root;
        at = next;
    }
    root
}

/// Merges two units; the smaller root wins, so every root is its unit's first position.
fn union(parent: &mut [usize], a: usize, b: usize) {
    let (a, b) = (find(parent, a), find(parent, b));
    if a != b {
        let (low, high) = if a < b { (a, b) } else { (b, a) };
        parent[high] = low;
    }
}

/// One turn as the unit rule reads it: `(position, role, group, meta pairs)`.
pub type UnitTurn<'a> = (usize, Role, Option<&'a str>, &'a [(String, String)]);

/// The compaction units of a whole ledger, kept sparse: only the positions in a unit of two
/// or more turns are listed, each with its root; every other turn is a unit of its own. A
/// ledger without groups or tool calls lists none, so checking it against a summary costs
/// nothing, and a turn that links nothing costs nothing to build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Units {
    len: usize,
    /// `(position, root)` of every turn in a unit of two or more, ascending position.
    linked: Vec<(usize, usize)>,
}

/// Whether a turn can link to another at all (SPEC §17.2, §15.6): it has a `group`, or it
/// is an assistant turn with `tool_calls` or a tool turn with `tool_call_id`.
pub fn may_link(role: Role, group: Option<&str>, meta: &[(String, String)]) -> bool {
    group.is_some()
        || match role {
            Role::Assistant => meta_value(meta, "tool_calls").is_some(),
            Role::Tool => meta_value(meta, "tool_call_id").is_some(),
            _ => false,
        }
}

impl Units {
    /// The units of `len` turns in sequence order. `turns` gives `(position, role, group,
    /// meta pairs)` in ascending position for at least every turn that [`may_link`] (any
    /// other turn may be given too, or left out: alone, it is its own unit). `tool_calls`
    /// counts on assistant turns only and `tool_call_id` on tool turns only, as the adapter
    /// sends them; `tool_calls` text that is not a list of calls names none.
    pub fn of<'a, I>(len: usize, turns: I) -> Units
    where
        I: IntoIterator<Item = UnitTurn<'a>>,
    {
        let picked: Vec<UnitTurn<'a>> = turns
            .into_iter()
            .filter(|&(_, role, group, meta)| may_link(role, group, meta))
            .collect();
        debug_assert!(picked.windows(2).all(|pair| pair[0].0 < pair[1].0));
        if picked.is_empty() {
            return Units {
                len,
                linked: Vec::new(),
            };
        }
        let parsed: Vec<Vec<String>> = picked
            .iter()
            .map(
                |&(_, role, _, meta)| match (role, meta_value(meta, "tool_calls")) {
                    (Role::Assistant, Some(text)) => tool_call_ids(text).unwrap_or_default(),
                    _ => Vec::new(),
                },
            )
            .collect();
        let members: Vec<UnitMember<'_>> = picked
            .iter()
            .zip(&parsed)
            .map(|(&(_, role, group, meta), calls)| UnitMember {
                group,
                calls: calls.iter().map(String::as_str).collect(),
                answers: (role == Role::Tool)
                    .then(|| meta_value(meta, "tool_call_id"))
                    .flatten(),
            })
            .collect();
        // Roots among the picked turns: the smallest index of each unit, which (positions
        // ascending) is also the unit's smallest position.
        let roots = unit_roots(&members);
        let mut sizes = vec![0u32; roots.len()];
        for &root in &roots {
            sizes[root] += 1;
        }
        let linked = roots
            .iter()
            .enumerate()
            .filter(|&(_, &root)| sizes[root] > 1)
            .map(|(at, &root)| (picked[at].0, picked[root].0))
            .collect();
        Units { len, linked }
    }

    /// True when every turn is a unit of its own (no group, no answered call).
    pub fn all_alone(&self) -> bool {
        self.linked.is_empty()
    }

    /// For each position, its unit's root (as [`unit_roots`] gives them).
    pub fn roots(&self) -> Vec<usize> {
        let mut roots: Vec<usize> = (0..self.len).collect();
        for &(position, root) in &self.linked {
            roots[position] = root;
        }
        roots
    }

    /// SPEC §17.2: the first position that is not a source but shares a unit with a source,
    /// or `None`; the same answer as [`unit_split`] over [`Units::roots`]. `source_positions`
    /// are ascending. Only the turns in a unit of two or more are looked at.
    pub fn split(&self, source_positions: &[usize]) -> Option<usize> {
        if self.linked.is_empty() || source_positions.is_empty() {
            return None;
        }
        // Which linked turns are sources: both lists ascend, so one walk in step, galloping
        // over the sources between two linked turns.
        let mut rest = source_positions;
        let is_source: Vec<bool> = self
            .linked
            .iter()
            .map(|&(position, _)| {
                rest = &rest[below(rest, position)..];
                rest.first() == Some(&position)
            })
            .collect();
        let mut source_units: Vec<usize> = self
            .linked
            .iter()
            .zip(&is_source)
            .filter(|&(_, &source)| source)
            .map(|(&(_, root), _)| root)
            .collect();
        if source_units.is_empty() {
            return None;
        }
        source_units.sort_unstable();
        source_units.dedup();
        self.linked
            .iter()
            .zip(&is_source)
            .find(|&(&(_, root), &source)| !source && source_units.binary_search(&root).is_ok())
            .map(|(&(position, _), _)| position)
    }
}

/// How many of `sorted` (ascending) are below `value`: an exponential search from the
/// front, so a walk that skips `k` items costs `O(log k)`.
fn below(sorted: &[usize], value: usize) -> usize {
    let mut high = 1;
    while high <= sorted.len() && sorted[high - 1] < value {
        high *= 2;
    }
    let low = high / 2;
    let high = high.min(sorted.len());
    low + sorted[low..high].partition_point(|&item| item < value)
}

/// SPEC §15.3: the positions (ascending) of the assistant turns with an open call, one no
/// tool turn answers ([`open_makers`]); `turns` as [`Units::of`] takes them. A `tool_calls`
/// text that is not a list of calls (stored before writes checked it) counts as open: such a
/// turn stays raw.
pub fn open_call_positions<'a, I>(turns: I) -> Vec<usize>
where
    I: IntoIterator<Item = UnitTurn<'a>>,
{
    let mut positions: Vec<usize> = Vec::new();
    let mut parsed: Vec<(usize, Vec<String>, Option<&'a str>)> = Vec::new();
    let mut malformed: Vec<usize> = Vec::new();
    for (position, role, _, meta) in turns {
        match role {
            Role::Assistant => match meta_value(meta, "tool_calls").map(tool_call_ids) {
                Some(Some(calls)) if !calls.is_empty() => parsed.push((position, calls, None)),
                Some(None) => malformed.push(position),
                _ => {}
            },
            Role::Tool => {
                if let Some(call) = meta_value(meta, "tool_call_id") {
                    parsed.push((position, Vec::new(), Some(call)));
                }
            }
            _ => {}
        }
    }
    let members: Vec<UnitMember<'_>> = parsed
        .iter()
        .map(|(_, calls, answers)| UnitMember {
            group: None,
            calls: calls.iter().map(String::as_str).collect(),
            answers: *answers,
        })
        .collect();
    positions.extend(open_makers(&members).into_iter().map(|at| parsed[at].0));
    positions.extend(malformed);
    positions.sort_unstable();
    positions
}

/// `unit_roots` over turns given as `(role, group, meta pairs)`: `tool_calls` counts on
/// assistant turns only and `tool_call_id` on tool turns only (SPEC §15.6), as the adapter
/// sends them.
pub fn turn_unit_roots<'a, I>(turns: I) -> Vec<usize>
where
    I: IntoIterator<Item = (Role, Option<&'a str>, &'a [(String, String)])>,
{
    let turns: Vec<_> = turns.into_iter().collect();
    Units::of(
        turns.len(),
        turns
            .iter()
            .enumerate()
            .map(|(position, &(role, group, meta))| (position, role, group, meta)),
    )
    .roots()
}

/// The value of `key` in meta pairs (sorted or not).
pub fn meta_value<'a>(meta: &'a [(String, String)], key: &str) -> Option<&'a str> {
    meta.iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

/// The call IDs of `tool_calls` JSON text: each array element's string `id`, in order.
/// `None` when the text is not a JSON array of objects each with a non-empty string `id`
/// (writes refuse that shape; a row stored before they did links nothing).
pub fn tool_call_ids(text: &str) -> Option<Vec<String>> {
    let calls: Vec<serde_json::Value> = serde_json::from_str(text).ok()?;
    calls
        .iter()
        .map(|call| match call.get("id") {
            Some(serde_json::Value::String(id)) if !id.is_empty() => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// SPEC §17.2: the first position that is not a source but shares a unit with a source,
/// or `None`. `roots` come from [`unit_roots`]; `source_positions` are ascending.
pub fn unit_split(roots: &[usize], source_positions: &[usize]) -> Option<usize> {
    let mut source_units: Vec<usize> = source_positions.iter().map(|&at| roots[at]).collect();
    source_units.sort_unstable();
    source_units.dedup();
    let mut sources = source_positions.iter().peekable();
    roots.iter().enumerate().find_map(|(position, root)| {
        if sources.peek() == Some(&&position) {
            sources.next();
            return None;
        }
        source_units.binary_search(root).is_ok().then_some(position)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member<'a>(
        group: Option<&'a str>,
        calls: &[&'a str],
        answers: Option<&'a str>,
    ) -> UnitMember<'a> {
        UnitMember {
            group,
            calls: calls.to_vec(),
            answers,
        }
    }

    #[test]
    fn groups_and_calls_link_transitively() {
        let members = [
            member(None, &[], None),            // 0 alone
            member(None, &["c1", "c2"], None),  // 1 calls c1, c2
            member(Some("g"), &[], Some("c1")), // 2 answers c1, group g
            member(None, &[], None),            // 3 alone
            member(Some("g"), &[], None),       // 4 group g
            member(None, &[], Some("c2")),      // 5 answers c2
            member(None, &[], Some("zz")),      // 6 answers a call nobody made
        ];
        assert_eq!(unit_roots(&members), vec![0, 1, 1, 3, 1, 1, 6]);
    }

    #[test]
    fn an_answer_before_its_call_still_joins_it() {
        let members = [member(None, &[], Some("c")), member(None, &["c"], None)];
        assert_eq!(unit_roots(&members), vec![0, 0]);
    }

    #[test]
    fn a_reused_call_id_pairs_each_result_with_its_own_call() {
        let members = [
            member(None, &["c"], None),   // 0 calls c
            member(None, &[], Some("c")), // 1 answers 0
            member(None, &[], None),      // 2 alone
            member(None, &["c"], None),   // 3 calls c again
            member(None, &[], Some("c")), // 4 answers 3
            member(None, &["c"], None),   // 5 calls c, not answered yet
        ];
        assert_eq!(
            answer_makers(&members),
            vec![None, Some(0), None, None, Some(3), None]
        );
        assert_eq!(unit_roots(&members), vec![0, 0, 2, 3, 3, 5]);
        assert_eq!(open_makers(&members), vec![5]);
    }

    #[test]
    fn a_result_before_any_call_joins_the_first_call_after_it() {
        let members = [
            member(None, &[], Some("c")), // 0: stored before its call
            member(None, &["c"], None),   // 1
            member(None, &["c"], None),   // 2
            member(None, &[], Some("c")), // 3 answers 2
        ];
        assert_eq!(answer_makers(&members), vec![Some(1), None, None, Some(2)]);
        assert_eq!(unit_roots(&members), vec![0, 0, 2, 2]);
        assert_eq!(open_makers(&members), Vec::<usize>::new());
    }

    #[test]
    fn a_call_is_open_until_a_result_of_its_own_arrives() {
        let members = [
            member(None, &["a", "b"], None), // 0 calls a and b
            member(None, &[], Some("a")),    // 1 answers 0's a
            member(None, &["a"], None),      // 2 calls a again
            member(None, &[], Some("a")),    // 3 answers 2; 0's b stays open
            member(None, &[], Some("b")),    // 4 answers 0's b (the only b)
        ];
        assert_eq!(open_makers(&members[..4]), vec![0]);
        assert_eq!(open_makers(&members), Vec::<usize>::new());
    }

    #[test]
    fn tool_call_ids_read_ids_and_refuse_other_shapes() {
        let ids = tool_call_ids(r#"[{"id": "a", "function": {"name": "f"}}, {"id": "b"}]"#);
        assert_eq!(ids, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(tool_call_ids("[]"), Some(vec![]));
        assert_eq!(tool_call_ids(r#"[{"id": 3}]"#), None);
        assert_eq!(tool_call_ids(r#"[{"id": ""}]"#), None);
        assert_eq!(tool_call_ids(r#"{"id": "a"}"#), None);
        assert_eq!(tool_call_ids("not json"), None);
    }

    #[test]
    fn unit_split_names_the_first_non_source_member() {
        let roots = [0, 1, 0, 3, 0];
        assert_eq!(unit_split(&roots, &[0, 2]), Some(4));
        assert_eq!(unit_split(&roots, &[0, 2, 4]), None);
        assert_eq!(unit_split(&roots, &[1]), None);
        assert_eq!(unit_split(&roots, &[4]), Some(0));
    }
}
