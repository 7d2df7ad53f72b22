//! Where batch work runs: on the current rayon pool, or inline on the calling thread.
//!
//! Outside a pool, rayon's `join` and parallel iterators hand work to its global pool and
//! wait for it: a caller that wants one core pays two thread wake-ups a batch for nothing,
//! and on a busy machine a wake-up can take milliseconds. [`Exec::Inline`] runs the same
//! steps, in the same order of results, on the calling thread.

use rayon::prelude::*;

/// How batch work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exec {
    /// In parallel on the current rayon pool (the global one outside any pool).
    Pool,
    /// Sequentially on the calling thread; no rayon pool is touched.
    Inline,
}

impl Exec {
    /// Both closures' results; in parallel on the pool, one after the other inline.
    pub fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        match self {
            Exec::Pool => rayon::join(a, b),
            Exec::Inline => (a(), b()),
        }
    }

    /// `f(index, item)` for every item, collected in order.
    pub fn map_indexed<T, R, C, F>(self, items: &[T], f: F) -> C
    where
        T: Sync,
        R: Send,
        F: Fn(usize, &T) -> R + Sync + Send,
        C: FromIterator<R> + FromParallelIterator<R>,
    {
        match self {
            Exec::Pool => items
                .par_iter()
                .enumerate()
                .map(|(index, item)| f(index, item))
                .collect(),
            Exec::Inline => items
                .iter()
                .enumerate()
                .map(|(index, item)| f(index, item))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_pool_give_the_same_results_in_order() {
        let items: Vec<u32> = (0..5000).collect();
        for exec in [Exec::Pool, Exec::Inline] {
            let doubled: Vec<u64> = exec.map_indexed(&items, |index, item| {
                u64::try_from(index).unwrap() + u64::from(*item)
            });
            assert_eq!(doubled, (0..5000).map(|n| 2 * n).collect::<Vec<u64>>());
            let failed: Option<Vec<u32>> =
                exec.map_indexed(&items, |_, item| (*item != 4321).then_some(*item));
            assert_eq!(failed, None);
            assert_eq!(exec.join(|| 1, || "two"), (1, "two"));
        }
    }

    #[test]
    fn inline_work_stays_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let items = [(); 64];
        let threads: Vec<std::thread::ThreadId> =
            Exec::Inline.map_indexed(&items, |_, ()| std::thread::current().id());
        assert!(threads.iter().all(|&thread| thread == caller));
        let (left, right) = Exec::Inline.join(
            || std::thread::current().id(),
            || std::thread::current().id(),
        );
        assert_eq!((left, right), (caller, caller));
        assert!(rayon::current_thread_index().is_none());
    }
}
