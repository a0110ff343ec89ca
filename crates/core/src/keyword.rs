//! The keyword channel of recall: Okapi BM25, scored exactly over one user's candidates, with
//! that user's own statistics (document count, average length, document frequencies), and
//! reciprocal rank fusion of the channels.
//!
//! A scan tokenises each candidate once ([`KeywordScan::add`]); only candidates that contain a
//! query term are kept, each with its length and its term counts, so memory grows with the
//! matches, never with the text.

use std::cell::RefCell;

use crate::scratch::Kept;
use crate::text::{for_each_token, for_each_token_where, prefix2, stem, TokenizerOptions};
use crate::topk::{Ranked, TopK};

/// BM25's two constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation (1.2 to 2 is usual).
    pub k1: f64,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f64,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.5 }
    }
}

/// A candidate that contains at least one query term.
#[derive(Clone, Copy, Debug)]
struct Matched {
    id: i64,
    len: u32,
    /// Where its (query term, occurrences) pairs start in `KeywordScan::tf`, and how many.
    tf_at: u32,
    tf_len: u16,
}

thread_local! {
    /// The matches' arrays, kept by the backend for the next scan ([`crate::scratch`]).
    static MATCHED: RefCell<Vec<Matched>> = const { RefCell::new(Vec::new()) };
    static TF: RefCell<Vec<(u16, u16)>> = const { RefCell::new(Vec::new()) };
    static LENGTHS: RefCell<Vec<(i64, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Accumulates the statistics of one query over a user's candidates.
#[derive(Debug)]
pub struct KeywordScan {
    opts: TokenizerOptions,
    /// Distinct query terms, sorted (a binary search per token).
    terms: Vec<u64>,
    /// The first two bytes of each ASCII query word, as a bitmap over all 65,536 pairs: a
    /// document word without one of them cannot match, and is only counted. `None` when a
    /// query word is not ASCII.
    prefixes: Option<Box<[u64; 1024]>>,
    /// Candidates seen, and their total length in tokens.
    docs: u64,
    total_len: u64,
    df: Vec<u32>,
    matched: Kept<Matched>,
    /// The (index of the query term, occurrences) pairs of every matched candidate, one after
    /// the other: one allocation for all of them.
    tf: Kept<(u16, u16)>,
    /// Every candidate's (id, length in tokens), in the order counted, when asked for
    /// ([`KeywordScan::keep_lengths`]).
    lengths: Kept<(i64, u32)>,
    keep_lengths: bool,
    counts: Vec<u16>,
}

impl KeywordScan {
    /// A scan for the words of `query`. A query with no words matches nothing.
    pub fn new(query: &str, opts: TokenizerOptions) -> Self {
        let mut terms = Vec::new();
        for_each_token(query, opts, |t| terms.push(t));
        terms.sort_unstable();
        terms.dedup();
        terms.truncate(u16::MAX as usize);
        let n = terms.len();
        // The prefixes of the query's ASCII words (before stemming: a word and its stem share them).
        let mut prefixes: Option<Box<[u64; 1024]>> = Some(Box::new([0u64; 1024]));
        let lower = query.to_lowercase();
        for w in lower.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’')) {
            let w: String = w.chars().filter(|c| *c != '\'' && *c != '’').collect();
            if w.is_empty() {
                continue;
            }
            if !w.is_ascii() || w.chars().any(crate::text::is_cjk) {
                prefixes = None;
                break;
            }
            if let Some(p) = prefixes.as_mut() {
                let stemmed = if opts.stem { stem(&w).into_owned() } else { w.clone() };
                for x in [prefix2(w.as_bytes()), prefix2(stemmed.as_bytes())] {
                    let i = u16::from_le_bytes(x) as usize;
                    p[i / 64] |= 1 << (i % 64);
                }
            }
        }
        KeywordScan {
            opts,
            terms,
            prefixes,
            docs: 0,
            total_len: 0,
            df: vec![0; n],
            matched: Kept::take(&MATCHED),
            tf: Kept::take(&TF),
            lengths: Kept::take(&LENGTHS),
            keep_lengths: false,
            counts: vec![0; n],
        }
    }

    /// Makes room for the statistics of up to `candidates` candidates at once.
    pub fn reserve(&mut self, candidates: usize) {
        self.matched.reserve(candidates);
        self.tf.reserve(candidates);
        if self.keep_lengths {
            self.lengths.reserve(candidates);
        }
    }

    /// Whether the query has any term at all.
    pub fn has_terms(&self) -> bool {
        !self.terms.is_empty()
    }

    /// Counts one candidate.
    pub fn add(&mut self, id: i64, text: &str) {
        self.docs += 1;
        let mut len = 0u32;
        let (terms, counts) = (&self.terms, &mut self.counts);
        counts.iter_mut().for_each(|c| *c = 0);
        let mut any = false;
        let prefixes = self.prefixes.as_deref();
        let want = |w: &[u8]| {
            prefixes.is_none_or(|p| {
                let i = u16::from_le_bytes(prefix2(w)) as usize;
                p[i / 64] & (1 << (i % 64)) != 0
            })
        };
        for_each_token_where(text, self.opts, want, |t| {
            len = len.saturating_add(1);
            if let Some(t) = t {
                if let Ok(i) = terms.binary_search(&t) {
                    counts[i] = counts[i].saturating_add(1);
                    any = true;
                }
            }
        });
        self.total_len += len as u64;
        if self.keep_lengths {
            self.lengths.push((id, len));
        }
        if any {
            let counts = std::mem::take(&mut self.counts);
            self.push_matched(id, len, counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (i as u16, *c)));
            self.counts = counts;
        }
    }

    /// The query's distinct terms, ascending: the order of the counts
    /// [`KeywordScan::add_counted`] takes.
    pub fn query_terms(&self) -> &[u64] {
        &self.terms
    }

    /// Counts one candidate of `len` tokens from the query's terms it has: (index in
    /// [`KeywordScan::query_terms`], count) each, in term order. The same statistics as
    /// [`KeywordScan::add`] with its text, when the counts are those of [`doc_terms`] of that
    /// text with this scan's tokenizer options (as a words pack keeps them, see
    /// [`crate::pack::Words::count_terms`]).
    pub fn add_counted(&mut self, id: i64, len: u32, hits: &[(u16, u16)]) {
        self.docs += 1;
        self.total_len += len as u64;
        if self.keep_lengths {
            self.lengths.push((id, len));
        }
        let terms = self.df.len();
        self.push_matched(id, len, hits.iter().copied().filter(|&(i, c)| c > 0 && (i as usize) < terms));
    }

    /// Records a candidate's (term index, count) pairs, if it has any.
    fn push_matched(&mut self, id: i64, len: u32, hits: impl Iterator<Item = (u16, u16)>) {
        let tf_at = self.tf.len() as u32;
        for (i, c) in hits {
            self.df[i as usize] += 1;
            self.tf.push((i, c));
        }
        let tf_len = (self.tf.len() as u32 - tf_at) as u16;
        if tf_len > 0 {
            self.matched.push(Matched { id, len, tf_at, tf_len });
        }
    }

    /// Keeps every candidate's length from now on, for [`KeywordScan::take_lengths`].
    pub fn keep_lengths(&mut self) {
        self.keep_lengths = true;
    }

    /// Every candidate's length in tokens, `(id, length)` sorted by id (the length BM25 weighs:
    /// the same counted from a text or from a words pack). Taken from the scan, which keeps no
    /// lengths after; the array goes back to the backend's slot when dropped ([`Kept`]).
    pub fn take_lengths(&mut self) -> Kept<(i64, u32)> {
        let mut out = std::mem::replace(&mut self.lengths, Kept::take(&LENGTHS));
        out.sort_unstable_by_key(|l| l.0);
        out
    }

    /// The tokenizer options of this scan.
    pub fn options(&self) -> TokenizerOptions {
        self.opts
    }

    /// Candidates seen so far.
    pub fn documents(&self) -> u64 {
        self.docs
    }

    /// The `n` best candidates by BM25, best first (ties: the newer id first), with their scores.
    pub fn top(&self, n: usize, p: Bm25Params) -> Vec<(i64, f64)> {
        if self.docs == 0 || self.matched.is_empty() || n == 0 {
            return Vec::new();
        }
        let docs = self.docs as f64;
        let avgdl = (self.total_len as f64 / docs).max(1.0);
        let idf: Vec<f64> = self.df.iter().map(|&df| (1.0 + (docs - df as f64 + 0.5) / (df as f64 + 0.5)).ln()).collect();
        // Higher score first, then the newer id: the order of [`TopK`] (every similarity 0), which
        // keeps n of them, whatever the matches.
        let mut best = TopK::new(n);
        for m in self.matched.iter() {
            let norm = p.k1 * (1.0 - p.b + p.b * m.len as f64 / avgdl);
            let tf = &self.tf[m.tf_at as usize..m.tf_at as usize + m.tf_len as usize];
            let score: f64 = tf.iter().map(|&(i, tf)| idf[i as usize] * (tf as f64 * (p.k1 + 1.0)) / (tf as f64 + norm)).sum();
            best.push(Ranked { id: m.id, score, similarity: 0.0 });
        }
        best.into_sorted().into_iter().map(|r| (r.id, r.score)).collect()
    }
}

/// A text's length in tokens and its distinct tokens with their counts (saturating at
/// `u16::MAX`), sorted by token: what [`KeywordScan::add_terms`] needs to count the text
/// without reading it again.
pub fn doc_terms(text: &str, opts: TokenizerOptions) -> (u32, Vec<(u64, u16)>) {
    let mut all = Vec::new();
    let mut len = 0u32;
    for_each_token(text, opts, |t| {
        len = len.saturating_add(1);
        all.push(t);
    });
    all.sort_unstable();
    let mut out: Vec<(u64, u16)> = Vec::new();
    for t in all {
        match out.last_mut() {
            Some((last, c)) if *last == t => *c = c.saturating_add(1),
            _ => out.push((t, 1)),
        }
    }
    (len, out)
}

/// One fused result: its id, fused score, and its rank (1-based) in each channel, if it was in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Fused {
    pub id: i64,
    pub score: f64,
    pub ranks: Vec<Option<usize>>,
}

/// Reciprocal rank fusion: each channel is a ranking (best first); a result scores
/// `Σ 1 / (k + rank)` over the channels it appears in. Best first; ties go to the better best
/// rank, then to the newer id.
pub fn rrf(channels: &[&[i64]], k: f64) -> Vec<Fused> {
    let mut out: Vec<Fused> = Vec::new();
    let mut at: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for (c, ranking) in channels.iter().enumerate() {
        for (r, id) in ranking.iter().enumerate() {
            let i = *at.entry(*id).or_insert_with(|| {
                out.push(Fused { id: *id, score: 0.0, ranks: vec![None; channels.len()] });
                out.len() - 1
            });
            if out[i].ranks[c].is_none() {
                out[i].ranks[c] = Some(r + 1);
                out[i].score += 1.0 / (k + (r + 1) as f64);
            }
        }
    }
    let best = |f: &Fused| f.ranks.iter().flatten().min().copied().unwrap_or(usize::MAX);
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(best(a).cmp(&best(b))).then(b.id.cmp(&a.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(query: &str, docs: &[(i64, &str)]) -> KeywordScan {
        let mut s = KeywordScan::new(query, TokenizerOptions::default());
        for (id, t) in docs {
            s.add(*id, t);
        }
        s
    }

    #[test]
    fn packed_terms_count_as_the_text_does() {
        // Words sharing prefixes with the query's, stop words, inflections, digits, CJK, repeats.
        let vocab = [
            "refund",
            "refunds",
            "refunded",
            "parcel",
            "parcels",
            "order",
            "ordering",
            "the",
            "of",
            "a",
            "when",
            "did",
            "I",
            "ask",
            "about",
            "re",
            "par",
            "orders",
            "2024",
            "上海",
            "用户住在上海",
            "café",
            "cafés",
            "Über",
            "ask",
            "asked",
            "asking",
            "it's",
            "don't",
        ];
        let mut seed = 17u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let docs: Vec<(i64, String)> = (0..300)
            .map(|i| {
                let words: Vec<&str> = (0..1 + next(40)).map(|_| vocab[next(vocab.len())]).collect();
                (i as i64, words.join(if i % 3 == 0 { ", " } else { " " }))
            })
            .collect();
        for opts in [
            TokenizerOptions::default(),
            TokenizerOptions { stop_words: false, stem: true },
            TokenizerOptions { stop_words: true, stem: false },
        ] {
            for query in ["When did I ask about the refund for the parcel order?", "上海 café", "Über 2024 orders", "it's"] {
                let mut by_text = KeywordScan::new(query, opts);
                let mut by_terms = KeywordScan::new(query, opts);
                by_text.keep_lengths();
                by_terms.keep_lengths();
                // The words packs' way: each document's terms in a pack, the query's terms
                // counted in all of a pack's documents at once.
                let mut packs = vec![crate::pack::WordsWriter::new(opts, 2000)];
                for (id, t) in &docs {
                    by_text.add(*id, t);
                    let (len, terms) = doc_terms(t, opts);
                    let facts = crate::pack::KeywordFacts { len, terms: &terms, kind: 0, archived: false, ends_at: 0 };
                    if !packs.last_mut().unwrap().push(*id, Some(&facts)) {
                        packs.push(crate::pack::WordsWriter::new(opts, 2000));
                        assert!(packs.last_mut().unwrap().push(*id, Some(&facts)));
                    }
                }
                assert!(packs.len() > 3, "several packs");
                let (mut hits, mut starts) = (Vec::new(), Vec::new());
                for bytes in packs.into_iter().map(|w| w.finish()) {
                    let w = crate::pack::Words::parse(&bytes).unwrap();
                    w.count_terms(by_terms.query_terms(), &mut hits, &mut starts);
                    for i in 0..w.len() {
                        let f = w.facts(i).expect("terms kept");
                        by_terms.add_counted(f.id, f.len, &hits[starts[i] as usize..starts[i + 1] as usize]);
                    }
                }
                let p = Bm25Params::default();
                assert_eq!(by_text.documents(), by_terms.documents());
                assert_eq!(by_text.top(1000, p), by_terms.top(1000, p), "{query} with {opts:?}");
                assert!(!by_text.top(5, p).is_empty() || query == "it's");
                // Every candidate's length, matched or not, the same both ways.
                let lengths = by_text.take_lengths();
                assert_eq!(lengths.len(), docs.len());
                assert!(lengths.windows(2).all(|w| w[0].0 <= w[1].0));
                assert_eq!(*lengths, *by_terms.take_lengths());
                assert!(by_text.take_lengths().is_empty(), "taken");
            }
        }
    }

    #[test]
    fn bm25_prefers_rare_terms_and_shorter_documents() {
        let docs = [
            (1, "We talked about the weather and the weather again"),
            (2, "Caroline went to the LGBTQ support group on Tuesday"),
            (3, "The support group was about the weather"),
            (4, "Melanie painted a sunset with her kids"),
        ];
        let s = scan("When did Caroline go to the support group?", &docs);
        let top = s.top(10, Bm25Params::default());
        assert_eq!(top[0].0, 2, "the only document with the rare term 'caroline' wins: {top:?}");
        assert_eq!(top.len(), 2, "documents without a query term are not returned");
        assert!(top[0].1 > top[1].1);
        assert!(s.top(10, Bm25Params::default()).iter().all(|(id, _)| *id != 4));
    }

    #[test]
    fn bm25_matches_against_a_hand_computation() {
        // N = 2, one term in doc 1 (len 2) only; avgdl = 2, so b does not matter; k1 = 1.2.
        let s = scan("tea", &[(1, "green tea"), (2, "black coffee")]);
        let top = s.top(5, Bm25Params::default());
        let idf = (1.0f64 + (2.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let expected = idf * (1.0 * 2.2) / (1.0 + 1.2);
        assert_eq!(top.len(), 1);
        assert!((top[0].1 - expected).abs() < 1e-12, "{} vs {expected}", top[0].1);
    }

    #[test]
    fn chinese_keywords_match_by_bigrams() {
        let s = scan("上海", &[(1, "用户住在上海"), (2, "用户住在北京"), (3, "他喜欢喝茶")]);
        let top = s.top(5, Bm25Params::default());
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn the_best_n_are_those_of_a_full_sort_ties_to_the_newer_id() {
        // Equal texts score equally: the newer id goes first, and a cut keeps the newer ones.
        let texts = ["tea", "green tea", "tea tea", "black tea with milk", "coffee"];
        let docs: Vec<(i64, &str)> = (0..200).map(|i| (i as i64 * 7 % 200, texts[i % texts.len()])).collect();
        let s = scan("tea", &docs);
        let all = s.top(1000, Bm25Params::default());
        assert_eq!(all.len(), 160, "every document with the term, and only those");
        for w in all.windows(2) {
            assert!(w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 > w[1].0), "{w:?}");
        }
        for n in [1, 5, 40, 159] {
            assert_eq!(s.top(n, Bm25Params::default()), all[..n].to_vec(), "n = {n}");
        }
        // A second scan (its arrays those the first one left) counts from nothing.
        drop(s);
        let again = scan("tea", &docs[..10]);
        assert_eq!(again.documents(), 10);
        assert_eq!(again.top(1000, Bm25Params::default()).len(), 8);
    }

    #[test]
    fn no_terms_no_matches() {
        let s = scan("the of and", &[(1, "the cat")]);
        assert!(!s.has_terms());
        assert!(s.top(5, Bm25Params::default()).is_empty());
    }

    #[test]
    fn rrf_sums_reciprocal_ranks_and_reports_them() {
        let vector = [10, 20, 30];
        let keyword = [30, 40];
        let fused = rrf(&[&vector, &keyword], 60.0);
        assert_eq!(fused[0].id, 30, "in both channels: {fused:?}");
        assert!((fused[0].score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(fused[0].ranks, vec![Some(3), Some(1)]);
        // 10 and 40 both rank first in one channel... 10 is first in vector (1/61), 40 second in keyword (1/62).
        assert_eq!(fused[1].id, 10);
        assert_eq!(fused[2].id, 40);
        assert_eq!(fused.iter().find(|f| f.id == 20).unwrap().ranks, vec![Some(2), None]);
        assert_eq!(fused.len(), 4);
    }

    #[test]
    fn rrf_ties_go_to_the_better_rank_then_the_newer_id() {
        let a = [1, 2];
        let b = [2, 1];
        let fused = rrf(&[&a, &b], 60.0);
        assert_eq!(fused[0].score, fused[1].score);
        assert_eq!(fused[0].id, 2, "equal scores and best ranks: the newer id first");
    }
}
