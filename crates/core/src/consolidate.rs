//! Consolidation: near-duplicate clustering, the built-in extractive summariser, and the
//! embedding of a summary.

use crate::vecmath;

/// Groups near-duplicates. `vectors` are unit vectors ordered by preference to keep (newest
/// first); each one joins the first earlier keeper whose cosine similarity is at least
/// `threshold`, or becomes a keeper. Returns, per vector, the index of its keeper (itself for
/// a keeper).
pub fn cluster_near_duplicates<V: AsRef<[f32]>>(vectors: &[V], threshold: f64) -> Vec<usize> {
    let mut keepers: Vec<usize> = Vec::new();
    let mut keeper_of = Vec::with_capacity(vectors.len());
    for (i, v) in vectors.iter().enumerate() {
        let v = v.as_ref();
        let found = keepers.iter().copied().find(|&k| {
            let other = vectors[k].as_ref();
            other.len() == v.len() && vecmath::dot_fast(other, v) >= threshold
        });
        match found {
            Some(k) => keeper_of.push(k),
            None => {
                keepers.push(i);
                keeper_of.push(i);
            }
        }
    }
    keeper_of
}

/// The normalised mean of unit vectors (the embedding of a summary of them). `None` when there
/// are none, their dimensions differ, or they cancel out.
pub fn mean_direction<V: AsRef<[f32]>>(vectors: &[V]) -> Option<Vec<f32>> {
    let dims = vectors.first()?.as_ref().len();
    let mut sum = vec![0f64; dims];
    for v in vectors {
        let v = v.as_ref();
        if v.len() != dims {
            return None;
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += *x as f64;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    Some(sum.iter().map(|x| (x / norm) as f32).collect())
}

/// The character budget of a built-in summary of `total` characters of fragments: a third,
/// at least 60 and at most 280.
pub fn summary_budget(total_chars: usize) -> usize {
    (total_chars / 3).clamp(60, 280)
}

fn is_sentence_end(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '\n' | ';' | '；')
}

/// Splits a text into sentences (kept with their end mark), trimmed, never empty.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c == '\n' {
            push_sentence(&mut out, &mut cur);
            continue;
        }
        cur.push(c);
        if is_sentence_end(c) {
            push_sentence(&mut out, &mut cur);
        }
    }
    push_sentence(&mut out, &mut cur);
    out
}

fn push_sentence(out: &mut Vec<String>, cur: &mut String) {
    let s = cur.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().any(|c| c.is_alphanumeric()) {
        out.push(s);
    }
    cur.clear();
}

/// Lowercased words; each CJK character counts as a word.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        let cjk = ('\u{4e00}'..='\u{9fff}').contains(&c) || ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{ac00}'..='\u{d7af}').contains(&c);
        if cjk {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.retain(|w| w.chars().count() > 2 || !w.is_ascii());
    out
}

/// The built-in summariser: deterministic and extractive. It splits the fragments (oldest
/// first) into sentences, drops repeats, scores each sentence by how many other fragments share
/// its words (what the fragments have in common is what they are about), and keeps the best
/// sentences that fit in the budget, in their original order. A first sentence longer than the
/// budget is cut at a word boundary.
pub fn extractive_summary(fragments: &[&str], budget_chars: usize) -> String {
    use std::collections::{HashMap, HashSet};
    struct Sentence {
        text: String,
        words: HashSet<String>,
        fragment: usize,
    }
    let mut all: Vec<Sentence> = Vec::new();
    let mut seen = HashSet::new();
    for (f, text) in fragments.iter().enumerate() {
        for s in sentences(text) {
            if seen.insert(s.to_lowercase()) {
                let words: HashSet<String> = tokens(&s).into_iter().collect();
                all.push(Sentence { text: s, words, fragment: f });
            }
        }
    }
    if all.is_empty() {
        return String::new();
    }
    // In how many fragments each word occurs.
    let mut df: HashMap<&str, HashSet<usize>> = HashMap::new();
    for s in &all {
        for w in &s.words {
            df.entry(w.as_str()).or_default().insert(s.fragment);
        }
    }
    let score = |s: &Sentence| -> f64 {
        let shared: f64 = s.words.iter().map(|w| (df[w.as_str()].len() - 1) as f64).sum();
        (shared + 0.5) / ((s.words.len().max(1)) as f64).sqrt()
    };
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|&a, &b| score(&all[b]).total_cmp(&score(&all[a])).then(a.cmp(&b)));
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0usize;
    for i in order {
        let len = all[i].text.chars().count();
        let sep = if chosen.is_empty() { 0 } else { 1 };
        if used + sep + len > budget_chars {
            continue;
        }
        // Skip a sentence that mostly repeats one already chosen.
        let redundant = chosen.iter().any(|&j| {
            let (a, b) = (&all[i].words, &all[j].words);
            let inter = a.intersection(b).count() as f64;
            let union = a.union(b).count().max(1) as f64;
            inter / union > 0.6
        });
        if !redundant {
            chosen.push(i);
            used += sep + len;
        }
    }
    if chosen.is_empty() {
        return cut_at_word(&all[0].text, budget_chars);
    }
    chosen.sort_unstable();
    chosen.iter().map(|&i| all[i].text.as_str()).collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max_chars` characters at a word boundary, with an ellipsis.
fn cut_at_word(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let limit = max_chars.saturating_sub(1);
    let cut: String = text.chars().take(limit).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(p) if p > limit / 2 => cut[..p].to_string(),
        _ => cut,
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        vecmath::normalized(v)
    }

    #[test]
    fn clusters_join_the_newest_similar_keeper() {
        let vs = vec![unit(&[1.0, 0.0, 0.0]), unit(&[0.0, 1.0, 0.0]), unit(&[1.0, 0.1, 0.0]), unit(&[0.0, 1.0, 0.05]), unit(&[0.0, 0.0, 1.0])];
        assert_eq!(cluster_near_duplicates(&vs, 0.95), vec![0, 1, 0, 1, 4]);
        // Nothing is similar enough at 0.9999: every vector keeps itself.
        assert_eq!(cluster_near_duplicates(&vs, 0.9999), vec![0, 1, 2, 3, 4]);
        assert!(cluster_near_duplicates::<Vec<f32>>(&[], 0.9).is_empty());
    }

    #[test]
    fn mean_direction_is_unit_and_between() {
        let m = mean_direction(&[unit(&[1.0, 0.0]), unit(&[0.0, 1.0])]).unwrap();
        assert!((m[0] - m[1]).abs() < 1e-6);
        assert!((vecmath::norm(&m) - 1.0).abs() < 1e-6);
        assert!(mean_direction(&[vec![1.0f32, 0.0], vec![-1.0, 0.0]]).is_none());
        assert!(mean_direction(&[vec![1.0f32, 0.0], vec![1.0]]).is_none());
        assert!(mean_direction::<Vec<f32>>(&[]).is_none());
    }

    #[test]
    fn summary_keeps_what_fragments_share_within_budget() {
        let fragments = [
            "Asked about the refund for order 1234.",
            "The refund for order 1234 was approved. Mentioned the weather.",
            "Complained that the refund took two weeks.",
            "Said thanks.",
        ];
        let s = extractive_summary(&fragments, 90);
        assert!(s.chars().count() <= 90, "{s}");
        assert!(s.contains("refund"), "{s}");
        assert!(!s.contains("weather"), "{s}");
        // Deterministic.
        assert_eq!(s, extractive_summary(&fragments, 90));
    }

    #[test]
    fn summary_of_repeats_is_one_sentence() {
        let s = extractive_summary(&["Likes tea.", "likes tea.", "Likes  tea."], 200);
        assert_eq!(s, "Likes tea.");
    }

    #[test]
    fn long_sentence_is_cut_at_a_word() {
        let s = extractive_summary(&["one two three four five six seven eight nine ten eleven twelve"], 30);
        assert!(s.chars().count() <= 30 && s.ends_with('…'), "{s}");
        assert!(s.starts_with("one two three"), "{s}");
    }

    #[test]
    fn chinese_fragments_are_summarised() {
        let s = extractive_summary(&["用户询问了退款。", "退款已经批准。", "天气很好。"], 60);
        assert!(s.contains("退款"), "{s}");
    }

    #[test]
    fn empty_input_gives_empty_summary() {
        assert_eq!(extractive_summary(&[], 100), "");
        assert_eq!(extractive_summary(&["  ", "..."], 100), "");
    }

    #[test]
    fn budget_is_a_third_within_bounds() {
        assert_eq!(summary_budget(243), 81);
        assert_eq!(summary_budget(30), 60);
        assert_eq!(summary_budget(10_000), 280);
    }
}
