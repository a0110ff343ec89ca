//! The prompt's memory: token counts and packing the channels into a budget.
//!
//! `memory_context` assembles what goes into a prompt: the system prompt's share is reserved
//! first; then standing instructions (procedural memories); then the working memory (the
//! session's last turns, the skeleton: when not all fit, the most recent are kept); then the
//! long-term memories, best first. An item that does not fit whole is left out, never cut, and
//! smaller ones after it may still fit.

use std::sync::OnceLock;

use crate::text::is_cjk;

/// How tokens are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tokenizer {
    /// OpenAI's cl100k_base BPE (GPT-4, GPT-3.5), from the tables `tiktoken-rs` ships.
    Cl100k,
    /// OpenAI's o200k_base BPE (GPT-4o and later).
    O200k,
    /// A cheap estimate with no tables: a CJK character is a token, other text a token per four
    /// characters (rounded up per word).
    Approximate,
}

fn cl100k() -> Option<&'static tiktoken_rs::CoreBPE> {
    static BPE: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
}

fn o200k() -> Option<&'static tiktoken_rs::CoreBPE> {
    static BPE: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// The approximate count: CJK characters one each, other words one per four characters.
pub fn approximate_tokens(text: &str) -> usize {
    let mut n = 0usize;
    let mut run = 0usize;
    for c in text.chars() {
        if is_cjk(c) {
            n += run.div_ceil(4) + 1;
            run = 0;
        } else if c.is_whitespace() {
            n += run.div_ceil(4);
            run = 0;
        } else {
            run += 1;
        }
    }
    n + run.div_ceil(4)
}

impl Tokenizer {
    /// Tokens of `text` (the approximation when the BPE tables cannot be loaded).
    pub fn count(self, text: &str) -> usize {
        let bpe = match self {
            Tokenizer::Cl100k => cl100k(),
            Tokenizer::O200k => o200k(),
            Tokenizer::Approximate => None,
        };
        match bpe {
            Some(b) => b.encode_ordinary(text).len(),
            None => approximate_tokens(text),
        }
    }
}

/// Texts up to this many bytes are counted whole; longer ones piece by piece.
const PIECE_BYTES: usize = 8192;

/// Where a long text is cut into pieces that count as the whole does: before a space that ends a
/// word, where both tokenizers' own pre-splitting starts a new piece anyway (a BPE piece is " word",
/// an approximate one a run between blanks).
fn cut_before(text: &str, at: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = at.min(bytes.len());
    while i < bytes.len() {
        if bytes[i] == b' ' && i > 0 && !bytes[i - 1].is_ascii_whitespace() && bytes.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

impl Tokenizer {
    /// Tokens of `text` when at most `cap`; otherwise some number above `cap` (counting stops
    /// once a long text is past it, so a huge memory costs no more than the budget it cannot
    /// fit), and `false` for "not exact".
    pub fn count_up_to(self, text: &str, cap: usize) -> (usize, bool) {
        if text.len() <= PIECE_BYTES {
            return (self.count(text), true);
        }
        let mut n = 0usize;
        let mut start = 0usize;
        while start < text.len() {
            let end = cut_before(text, start + PIECE_BYTES);
            n += self.count(&text[start..end]);
            start = end;
            if n > cap && start < text.len() {
                return (n, false);
            }
        }
        (n, true)
    }
}

/// One candidate for the prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub tokens: usize,
}

/// What was packed: the indexes kept from each channel (in the order they go into the prompt),
/// and how many were left out.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Packed {
    pub procedural: Vec<usize>,
    pub working: Vec<usize>,
    pub long_term: Vec<usize>,
    pub left_out: usize,
    pub used: usize,
}

/// Packs the channels into `budget` tokens. `working` is oldest first; when not all of it fits,
/// the most recent turns are kept (and still returned oldest first). `procedural` and
/// `long_term` are in priority order; an item that does not fit is skipped, and later, smaller
/// ones may still fit. The sum of the kept items' tokens never exceeds `budget`.
pub fn pack(budget: usize, procedural: &[Item], working: &[Item], long_term: &[Item]) -> Packed {
    let mut p = Packed::default();
    let mut left = budget;
    fn take(tokens: usize, left: &mut usize) -> bool {
        if tokens <= *left {
            *left -= tokens;
            true
        } else {
            false
        }
    }
    for (i, it) in procedural.iter().enumerate() {
        if take(it.tokens, &mut left) {
            p.procedural.push(i);
        } else {
            p.left_out += 1;
        }
    }
    // The working memory, newest first, stops at the first turn that does not fit: a gap in the
    // middle of a conversation would mislead more than a shorter one.
    let mut kept = Vec::new();
    for (i, it) in working.iter().enumerate().rev() {
        if take(it.tokens, &mut left) {
            kept.push(i);
        } else {
            p.left_out += i + 1;
            break;
        }
    }
    kept.reverse();
    p.working = kept;
    for (i, it) in long_term.iter().enumerate() {
        if take(it.tokens, &mut left) {
            p.long_term.push(i);
        } else {
            p.left_out += 1;
        }
    }
    p.used = budget - left;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(v: &[usize]) -> Vec<Item> {
        v.iter().map(|&t| Item { tokens: t }).collect()
    }

    #[test]
    fn a_long_text_counts_piece_by_piece_as_it_counts_whole_and_stops_past_the_cap() {
        let mut text = String::new();
        for i in 0..6000 {
            text.push_str(&format!("word{i} 東京 is-a hyphen, {i}.  spaced\nline "));
        }
        assert!(text.len() > 20 * PIECE_BYTES);
        for t in [Tokenizer::Cl100k, Tokenizer::O200k, Tokenizer::Approximate] {
            let whole = t.count(&text);
            assert_eq!(t.count_up_to(&text, usize::MAX), (whole, true), "{t:?}");
            assert_eq!(t.count_up_to(&text, whole), (whole, true), "{t:?}");
            let (n, exact) = t.count_up_to(&text, 100);
            assert!(!exact && n > 100 && n < whole / 4, "{t:?}: {n} of {whole}");
            let short = "Prefers neovim as editor";
            assert_eq!(t.count_up_to(short, 1), (t.count(short), true));
        }
    }

    #[test]
    fn counts_tokens_with_the_bpe_tables_and_the_approximation() {
        let n = Tokenizer::Cl100k.count("The user is allergic to peanuts.");
        assert!((6..=9).contains(&n), "{n}");
        assert!(Tokenizer::O200k.count("hello world") >= 2);
        // Chinese: roughly a token per character or two.
        let zh = Tokenizer::Cl100k.count("用户喜欢喝茶，记住这一点");
        assert!((6..=24).contains(&zh), "{zh}");
        assert_eq!(approximate_tokens("hello world"), 4);
        assert_eq!(approximate_tokens("用户喜欢"), 4);
        assert_eq!(approximate_tokens(""), 0);
    }

    #[test]
    fn packing_keeps_the_newest_turns_and_skips_what_does_not_fit() {
        let p = pack(80, &items(&[10]), &items(&[30, 30, 30]), &items(&[50, 5, 1]));
        assert_eq!(p.procedural, vec![0]);
        assert_eq!(p.working, vec![1, 2], "the oldest turn is dropped first");
        // 80 - 10 - 60 = 10 left: the 50 is skipped, 5 and 1 fit.
        assert_eq!(p.long_term, vec![1, 2]);
        assert_eq!(p.left_out, 2);
        assert_eq!(p.used, 76);
    }

    /// A small deterministic generator, so the property test needs no crate.
    fn next(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn property_never_over_budget_order_kept_and_reservation_respected() {
        let mut seed = 7u64;
        for _ in 0..5_000 {
            let total = (next(&mut seed) % 3000) as usize;
            let reserved = (next(&mut seed) % (total as u64 + 1)) as usize;
            let budget = total - reserved;
            let mk = |seed: &mut u64, n: u64| -> Vec<Item> {
                let len = (next(seed) % n) as usize;
                (0..len).map(|_| Item { tokens: (next(seed) % 400) as usize }).collect()
            };
            let (pr, wo, lt) = (mk(&mut seed, 4), mk(&mut seed, 12), mk(&mut seed, 15));
            let p = pack(budget, &pr, &wo, &lt);
            let sum: usize = p.procedural.iter().map(|&i| pr[i].tokens).sum::<usize>()
                + p.working.iter().map(|&i| wo[i].tokens).sum::<usize>()
                + p.long_term.iter().map(|&i| lt[i].tokens).sum::<usize>();
            assert!(sum <= budget, "{sum} > {budget}");
            assert_eq!(sum, p.used);
            assert!(sum + reserved <= total, "the reservation is never squeezed");
            assert!(p.working.windows(2).all(|w| w[0] + 1 == w[1]), "working turns stay in order and contiguous");
            if let Some(&last) = p.working.last() {
                assert_eq!(last, wo.len() - 1, "the newest turn is kept first");
            }
            assert!(p.long_term.windows(2).all(|w| w[0] < w[1]), "long-term order kept");
            assert_eq!(p.procedural.len() + p.working.len() + p.long_term.len() + p.left_out, pr.len() + wo.len() + lt.len());
        }
    }
}
