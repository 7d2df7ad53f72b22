//! A list fingerprint (SPEC §3) that can be extended without hashing the digests again.
//!
//! Fingerprint v1 hashes the count first (`u64 count || digest_1 || … || digest_k`), so a
//! plain hasher cannot be resumed when digests are appended. BLAKE3 is a tree hash, though:
//! the input is cut into 1 KiB chunks, and the chaining value of an aligned, complete
//! subtree depends only on its bytes and its position. Appending digests keeps every chunk
//! after the first (the count lives in chunk 0) and changes only the right edge of the tree.
//!
//! [`ExtendableFingerprint`] keeps what a later fingerprint needs and nothing more: the digest
//! bytes of chunk 0 (after the count), the bytes after the last complete chunk, and the
//! chaining values of the maximal aligned complete subtrees covering chunks `1..complete`
//! (at most two per level, like BLAKE3's own stack). The fingerprint of the held digests
//! followed by `more` then costs O(`more` + log count) compressions instead of O(count), and
//! equals [`crate::fingerprint_digests`] over the same digests byte for byte (the golden
//! vectors and the property tests check it).

use std::sync::OnceLock;

use blake3::hazmat::{
    hash_derive_key_context, left_subtree_len, merge_subtrees_non_root, merge_subtrees_root,
    ChainingValue, ContextKey, HasherExt, Mode,
};
use blake3::{Hasher, CHUNK_LEN};

use crate::fingerprint::FINGERPRINT_CONTEXT;

const CHUNK: u64 = CHUNK_LEN as u64;
/// The count prefix of the fingerprint material.
const COUNT_LEN: u64 = 8;
/// Digest bytes that share chunk 0 with the count.
const HEAD_LEN: usize = CHUNK_LEN - 8;

/// An offset into bytes held in memory (it fits a `usize` because the bytes exist).
fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("an offset into bytes in memory")
}

fn context_key() -> &'static ContextKey {
    static KEY: OnceLock<ContextKey> = OnceLock::new();
    KEY.get_or_init(|| hash_derive_key_context(FINGERPRINT_CONTEXT))
}

fn mode() -> Mode<'static> {
    Mode::DeriveKeyMaterial(context_key())
}

fn hasher_at(offset: u64) -> Hasher {
    let mut hasher = Hasher::new_from_context_key(context_key());
    if offset > 0 {
        hasher.set_input_offset(offset);
    }
    hasher
}

/// A complete, aligned subtree of `chunks` chunks (a power of two) starting at chunk `start`.
#[derive(Clone, Debug)]
struct Block {
    start: u64,
    chunks: u64,
    cv: ChainingValue,
}

/// The fingerprint state of a list of digests that only grows at the end.
#[derive(Clone, Debug, Default)]
pub struct ExtendableFingerprint {
    count: u64,
    /// Digest bytes `0..min(len, HEAD_LEN)`: chunk 0 after the count.
    head: Vec<u8>,
    /// Complete chunks of the material (`(8 + 32 * count) / 1024`).
    complete: u64,
    /// Maximal aligned complete subtrees covering chunks `1..complete`, left to right.
    blocks: Vec<Block>,
    /// Digest bytes after the last complete chunk (empty while chunk 0 is incomplete: the
    /// head holds them).
    tail: Vec<u8>,
}

/// Where the material's bytes are: the count, the held head and tail, and `more` after them.
struct Material<'a> {
    state: &'a ExtendableFingerprint,
    count: [u8; 8],
    more: &'a [u8],
    /// Digest offset at which `more` begins.
    held: u64,
    /// Digest offset at which the held tail begins.
    tail_start: u64,
}

impl Material<'_> {
    fn len(&self) -> u64 {
        COUNT_LEN + self.held + self.more.len() as u64
    }

    /// Whether the material bytes `start..end` are all at hand (none inside the complete
    /// chunks whose bytes were let go).
    fn readable(&self, start: u64, end: u64) -> bool {
        let hole_start = COUNT_LEN + self.state.head.len() as u64;
        let hole_end = COUNT_LEN + self.tail_start;
        end <= hole_start || start >= hole_end || hole_start >= hole_end
    }

    /// Feeds the material bytes `start..end` (readable) to `hasher`.
    fn feed(&self, hasher: &mut Hasher, start: u64, end: u64) {
        let mut at = start;
        if at < COUNT_LEN {
            let stop = end.min(COUNT_LEN);
            hasher.update(&self.count[index(at)..index(stop)]);
            at = stop;
        }
        let segments: [(u64, &[u8]); 3] = [
            (0, &self.state.head),
            (self.tail_start, &self.state.tail),
            (self.held, self.more),
        ];
        for (offset, bytes) in segments {
            let first = COUNT_LEN + offset;
            let last = first + bytes.len() as u64;
            if at >= end {
                break;
            }
            if at < first || at >= last {
                continue;
            }
            let stop = end.min(last);
            hasher.update(&bytes[index(at - first)..index(stop - first)]);
            at = stop;
        }
        assert_eq!(at, end, "material bytes {at}..{end} are not held");
    }

    fn cached(&self, start: u64, len: u64) -> Option<&ChainingValue> {
        if start == 0 || len % CHUNK != 0 {
            return None;
        }
        let (chunk, chunks) = (start / CHUNK, len / CHUNK);
        self.state
            .blocks
            .iter()
            .find(|block| block.start == chunk && block.chunks == chunks)
            .map(|block| &block.cv)
    }

    /// The chaining value of the (non-root) subtree of material bytes `start..start + len`.
    fn subtree(&self, start: u64, len: u64) -> ChainingValue {
        if let Some(cv) = self.cached(start, len) {
            return *cv;
        }
        if len <= CHUNK || self.readable(start, start + len) {
            let mut hasher = hasher_at(start);
            self.feed(&mut hasher, start, start + len);
            return hasher.finalize_non_root();
        }
        let left = left_subtree_len(len);
        merge_subtrees_non_root(
            &self.subtree(start, left),
            &self.subtree(start + left, len - left),
            mode(),
        )
    }

    fn root(&self) -> [u8; 32] {
        let len = self.len();
        if len <= CHUNK {
            let mut hasher = hasher_at(0);
            self.feed(&mut hasher, 0, len);
            return *hasher.finalize().as_bytes();
        }
        let left = left_subtree_len(len);
        *merge_subtrees_root(
            &self.subtree(0, left),
            &self.subtree(left, len - left),
            mode(),
        )
        .as_bytes()
    }
}

impl ExtendableFingerprint {
    /// The state of digests given back to back (32 bytes each).
    ///
    /// # Panics
    /// When the length is not a multiple of 32 (a caller bug).
    pub fn new(digests: &[u8]) -> Self {
        let mut state = ExtendableFingerprint::default();
        state.extend(digests);
        state
    }

    /// How many digests it holds.
    pub fn count(&self) -> u64 {
        self.count
    }

    fn tail_start(&self) -> u64 {
        if self.complete == 0 {
            32 * self.count
        } else {
            self.complete * CHUNK - COUNT_LEN
        }
    }

    fn material<'a>(&'a self, more: &'a [u8]) -> Material<'a> {
        let count = self.count + (more.len() / 32) as u64;
        Material {
            state: self,
            count: count.to_le_bytes(),
            more,
            held: 32 * self.count,
            tail_start: self.tail_start(),
        }
    }

    /// The raw fingerprint of the held digests followed by `more` (32 bytes each), equal to
    /// [`crate::fingerprint_digests`] over them all.
    ///
    /// # Panics
    /// When `more`'s length is not a multiple of 32 (a caller bug).
    pub fn fingerprint(&self, more: &[u8]) -> [u8; 32] {
        assert_eq!(more.len() % 32, 0, "digests are 32 bytes each");
        self.material(more).root()
    }

    /// Appends digests (32 bytes each): O(`more` + log count) work.
    ///
    /// # Panics
    /// When the length is not a multiple of 32 (a caller bug).
    pub fn extend(&mut self, more: &[u8]) {
        assert_eq!(more.len() % 32, 0, "digests are 32 bytes each");
        if more.is_empty() {
            return;
        }
        let complete = (COUNT_LEN + 32 * self.count + more.len() as u64) / CHUNK;
        // The new complete chunks after chunk 0, hashed as maximal aligned subtrees (many
        // chunks per call, so BLAKE3's SIMD lanes are used) and merged into the stack.
        let mut new_blocks = Vec::new();
        {
            let material = self.material(more);
            let mut chunk = self.complete.max(1);
            while chunk < complete {
                let aligned = 1u64 << chunk.trailing_zeros();
                let mut chunks = aligned;
                while chunks > complete - chunk {
                    chunks /= 2;
                }
                let (start, end) = (chunk * CHUNK, (chunk + chunks) * CHUNK);
                let mut hasher = hasher_at(start);
                material.feed(&mut hasher, start, end);
                new_blocks.push(Block {
                    start: chunk,
                    chunks,
                    cv: hasher.finalize_non_root(),
                });
                chunk += chunks;
            }
        }
        for block in new_blocks {
            self.push(block);
        }
        // Chunk 0's digest bytes (all digests so far, while it is incomplete).
        if self.head.len() < HEAD_LEN {
            let take = more.len().min(HEAD_LEN - self.head.len());
            self.head.extend_from_slice(&more[..take]);
        }
        // The bytes after the last complete chunk: from the old tail (which begins at or
        // before the new one) and from `more`.
        let held = 32 * self.count;
        let old_tail_start = held - self.tail.len() as u64;
        self.count += (more.len() / 32) as u64;
        self.complete = complete;
        let mut tail = Vec::new();
        if complete > 0 {
            let tail_start = self.tail_start();
            for (first, bytes) in [(old_tail_start, self.tail.as_slice()), (held, more)] {
                let from = tail_start.max(first);
                if from < first + bytes.len() as u64 {
                    tail.extend_from_slice(&bytes[index(from - first)..]);
                }
            }
        }
        self.tail = tail;
    }

    fn push(&mut self, block: Block) {
        self.blocks.push(block);
        while let [.., left, right] = self.blocks.as_slice() {
            if left.chunks != right.chunks || left.start % (2 * left.chunks) != 0 {
                break;
            }
            let merged = Block {
                start: left.start,
                chunks: 2 * left.chunks,
                cv: merge_subtrees_non_root(&left.cv, &right.cv, mode()),
            };
            self.blocks.truncate(self.blocks.len() - 2);
            self.blocks.push(merged);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint_digests;

    #[allow(clippy::cast_possible_truncation)]
    fn digests(n: usize, seed: u8) -> Vec<u8> {
        (0..n * 32)
            .map(|i| {
                (i as u8)
                    .wrapping_mul(31)
                    .wrapping_add(seed ^ (i / 32) as u8)
            })
            .collect()
    }

    fn plain(bytes: &[u8]) -> [u8; 32] {
        fingerprint_digests(bytes.chunks_exact(32).map(|d| d.try_into().unwrap()))
    }

    #[test]
    fn lengths_up_to_300_chunks_match_the_plain_hash() {
        let all = digests(10_100, 7);
        for n in (0..10_000)
            .step_by(37)
            .chain([0, 1, 31, 32, 63, 64, 95, 96, 97])
        {
            let state = ExtendableFingerprint::new(&all[..n * 32]);
            assert_eq!(state.fingerprint(&[]), plain(&all[..n * 32]), "n={n}");
            for more in [1usize, 8, 33] {
                let end = (n + more) * 32;
                assert_eq!(
                    state.fingerprint(&all[n * 32..end]),
                    plain(&all[..end]),
                    "n={n}+{more}"
                );
            }
        }
    }

    #[test]
    fn extending_step_by_step_equals_building_at_once() {
        let all = digests(3_000, 3);
        let mut state = ExtendableFingerprint::default();
        let mut n = 0;
        for step in [1usize, 8, 8, 31, 1, 64, 200, 7, 1000, 3, 500, 1177] {
            state.extend(&all[n * 32..(n + step) * 32]);
            n += step;
            assert_eq!(state.count(), n as u64);
            assert_eq!(state.fingerprint(&[]), plain(&all[..n * 32]), "n={n}");
            let fresh = ExtendableFingerprint::new(&all[..n * 32]);
            assert_eq!(fresh.blocks.len(), state.blocks.len());
            assert_eq!(fresh.tail, state.tail);
            assert_eq!(fresh.head, state.head);
        }
    }

    #[test]
    fn keeps_only_a_logarithmic_state() {
        let state = ExtendableFingerprint::new(&digests(100_000, 1));
        assert!(state.blocks.len() <= 2 * 64);
        assert!(state.head.len() <= HEAD_LEN && state.tail.len() < CHUNK_LEN);
    }
}
