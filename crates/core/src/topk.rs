//! Bounded top-k selection.
//!
//! Recall scores every candidate of a user but keeps only `k` of them: a min-heap of at most `k`
//! entries, so memory stays `O(k)` whatever the number of candidates, and time `O(n log k)`.
//!
//! The order is total and deterministic: higher score first, then higher similarity, then the
//! higher id (the newer memory). Scores are compared with `f64::total_cmp`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One scored candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranked {
    pub id: i64,
    pub score: f64,
    pub similarity: f64,
}

impl Ranked {
    /// `Ordering::Greater` when `self` ranks before `other`.
    pub fn rank_cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| self.similarity.total_cmp(&other.similarity)).then_with(|| self.id.cmp(&other.id))
    }
}

/// Heap entry whose `Ord` is reversed, so the `BinaryHeap` keeps the worst kept entry on top.
#[derive(Clone, Debug)]
struct Worst<P>(Ranked, P);

impl<P> PartialEq for Worst<P> {
    fn eq(&self, other: &Self) -> bool {
        self.0.rank_cmp(&other.0) == Ordering::Equal
    }
}
impl<P> Eq for Worst<P> {}
impl<P> PartialOrd for Worst<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> Ord for Worst<P> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.rank_cmp(&self.0)
    }
}

/// Keeps the best `k` candidates offered to it, each with a payload `P` (an embedding, say).
#[derive(Debug)]
pub struct TopKWith<P> {
    k: usize,
    heap: BinaryHeap<Worst<P>>,
}

/// Keeps the best `k` candidates offered to it.
pub type TopK = TopKWith<()>;

impl<P> TopKWith<P> {
    pub fn new(k: usize) -> Self {
        TopKWith { k, heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1) }
    }

    /// The score a new candidate must beat to enter, once `k` are kept.
    pub fn threshold(&self) -> Option<&Ranked> {
        if self.heap.len() < self.k {
            None
        } else {
            self.heap.peek().map(|w| &w.0)
        }
    }

    /// Whether a candidate would be kept (so that its payload need only be made then).
    pub fn admits(&self, r: &Ranked) -> bool {
        self.k > 0 && self.threshold().is_none_or(|worst| r.rank_cmp(worst) == Ordering::Greater)
    }

    /// Offers a candidate with its payload; returns whether it was kept.
    pub fn push_with(&mut self, r: Ranked, payload: P) -> bool {
        if !self.admits(&r) {
            return false;
        }
        if self.heap.len() == self.k {
            self.heap.pop();
        }
        self.heap.push(Worst(r, payload));
        true
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The kept candidates with their payloads, best first.
    pub fn into_sorted_with(self) -> Vec<(Ranked, P)> {
        let mut v: Vec<(Ranked, P)> = self.heap.into_iter().map(|w| (w.0, w.1)).collect();
        v.sort_by(|a, b| b.0.rank_cmp(&a.0));
        v
    }
}

impl TopK {
    /// Offers a candidate; returns whether it was kept.
    pub fn push(&mut self, r: Ranked) -> bool {
        self.push_with(r, ())
    }

    /// The kept candidates, best first.
    pub fn into_sorted(self) -> Vec<Ranked> {
        self.into_sorted_with().into_iter().map(|(r, _)| r).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, so the tests need no crate.
    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
    }

    fn full_sort(mut v: Vec<Ranked>, k: usize) -> Vec<Ranked> {
        v.sort_by(|a, b| b.rank_cmp(a));
        v.truncate(k);
        v
    }

    #[test]
    fn matches_a_full_sort() {
        let mut seed = 42;
        for &(n, k) in &[(0, 5), (3, 5), (5, 5), (1000, 5), (1000, 1), (500, 499), (200, 1000)] {
            let items: Vec<Ranked> = (0..n)
                .map(|i| {
                    // Coarse scores so that ties happen and the tie-break is exercised.
                    let s = (lcg(&mut seed) * 20.0).floor() / 20.0;
                    let sim = (lcg(&mut seed) * 4.0).floor() / 4.0;
                    Ranked { id: i as i64, score: s, similarity: sim }
                })
                .collect();
            let mut t = TopK::new(k);
            for r in &items {
                t.push(*r);
            }
            assert_eq!(t.len(), n.min(k));
            assert_eq!(t.into_sorted(), full_sort(items, k), "n={n} k={k}");
        }
    }

    #[test]
    fn ties_prefer_higher_similarity_then_newer_id() {
        let mut t = TopK::new(2);
        t.push(Ranked { id: 1, score: 0.5, similarity: 0.5 });
        t.push(Ranked { id: 2, score: 0.5, similarity: 0.5 });
        t.push(Ranked { id: 3, score: 0.5, similarity: 0.6 });
        let ids: Vec<i64> = t.into_sorted().iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![3, 2]);
    }

    #[test]
    fn k_zero_keeps_nothing_and_threshold_appears_when_full() {
        let mut t = TopK::new(0);
        assert!(!t.push(Ranked { id: 1, score: 1.0, similarity: 1.0 }));
        assert!(t.is_empty());
        let mut t = TopK::new(2);
        t.push(Ranked { id: 1, score: 0.1, similarity: 0.0 });
        assert!(t.threshold().is_none());
        t.push(Ranked { id: 2, score: 0.9, similarity: 0.0 });
        assert_eq!(t.threshold().unwrap().id, 1);
        assert!(!t.push(Ranked { id: 3, score: 0.05, similarity: 0.0 }));
        assert!(t.push(Ranked { id: 4, score: 0.5, similarity: 0.0 }));
        assert_eq!(t.threshold().unwrap().id, 4);
    }
}
