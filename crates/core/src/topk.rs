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
        self.score
            .total_cmp(&other.score)
            .then_with(|| self.similarity.total_cmp(&other.similarity))
            .then_with(|| self.id.cmp(&other.id))
    }
}

/// Heap entry whose `Ord` is reversed, so the `BinaryHeap` keeps the worst kept entry on top.
#[derive(Clone, Copy, Debug)]
struct Worst(Ranked);

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.0.rank_cmp(&other.0) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.rank_cmp(&self.0)
    }
}

/// Keeps the best `k` candidates offered to it.
#[derive(Debug)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        TopK { k, heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1) }
    }

    /// The score a new candidate must beat to enter, once `k` are kept.
    pub fn threshold(&self) -> Option<&Ranked> {
        if self.heap.len() < self.k { None } else { self.heap.peek().map(|w| &w.0) }
    }

    /// Offers a candidate; returns whether it was kept.
    pub fn push(&mut self, r: Ranked) -> bool {
        if self.k == 0 {
            return false;
        }
        if self.heap.len() < self.k {
            self.heap.push(Worst(r));
            return true;
        }
        let worst = self.heap.peek().expect("heap is full, so not empty");
        if r.rank_cmp(&worst.0) == Ordering::Greater {
            self.heap.pop();
            self.heap.push(Worst(r));
            true
        } else {
            false
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The kept candidates, best first.
    pub fn into_sorted(self) -> Vec<Ranked> {
        let mut v: Vec<Ranked> = self.heap.into_iter().map(|w| w.0).collect();
        v.sort_by(|a, b| b.rank_cmp(a));
        v
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
