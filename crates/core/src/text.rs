//! Tokenising text for the keyword channel of recall, in English and Chinese.
//!
//! * Words: runs of letters and digits (Unicode alphanumerics, apostrophes inside a word are
//!   dropped: "don't" → "dont"), lower-cased. Optionally English stop words are skipped and a
//!   light stemmer folds plural and verb endings ("plays", "played", "playing" → "play").
//! * Chinese, Japanese and Korean ideographs have no spaces between words: a run of them gives
//!   its overlapping character bigrams ("我喜欢茶" → 我喜, 喜欢, 欢茶), and a single ideograph
//!   itself. Bigrams need no dictionary and match any word of two or more characters.
//!
//! Tokens are returned as 64-bit hashes (FNV-1a), so counting them allocates nothing per token.

/// How words are normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenizerOptions {
    /// Skip common English function words ("the", "a", "is", ...).
    pub stop_words: bool,
    /// Fold common English suffixes (-s, -es, -ed, -ing, -ly).
    pub stem: bool,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        TokenizerOptions { stop_words: true, stem: true }
    }
}

/// English function words that carry no topic. Short on purpose: BM25's idf already weighs
/// frequent words down; this list removes the ones that match almost every memory.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "his", "i", "if", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so",
    "that", "the", "their", "them", "then", "there", "they", "this", "to", "was", "we", "were", "what", "when",
    "where", "which", "who", "will", "with", "you", "your",
];

/// Whether `c` is a CJK ideograph, kana or hangul: script written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FFFF) // CJK extensions B and later
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The hash of a token given as text (for tests and query terms).
pub fn hash_token(token: &str) -> u64 {
    fnv(token.as_bytes(), FNV_OFFSET)
}

/// Folds common English endings, so that "plays", "played", "playing" and "play" meet, and so do
/// "hike", "hiked", "hiking", and "story", "stories". Never shortens a word below three letters;
/// leaves non-ASCII words alone. A light stemmer: it only has to make a word and its inflections
/// agree with each other, not produce dictionary words.
pub fn stem(word: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if !word.is_ascii() || word.len() <= 3 {
        return Cow::Borrowed(word);
    }
    let b = word.as_bytes();
    let mut w: &str = word;
    if let Some(x) = w.strip_suffix("ies") {
        if x.len() >= 2 {
            return Cow::Owned(format!("{x}y"));
        }
    }
    if let Some(x) = w.strip_suffix("es") {
        if x.ends_with('s') || x.ends_with('x') || x.ends_with('z') || x.ends_with("ch") || x.ends_with("sh") {
            w = x;
        }
    }
    if w.len() == word.len() && b[b.len() - 1] == b's' && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w = &w[..w.len() - 1];
    }
    if w.len() == word.len() {
        for suffix in ["ing", "ed"] {
            if let Some(x) = w.strip_suffix(suffix) {
                if x.len() >= 3 {
                    let xb = x.as_bytes();
                    let n = xb.len();
                    // running -> run, stopped -> stop
                    w = if xb[n - 1] == xb[n - 2] && !matches!(xb[n - 1], b'l' | b's' | b'z') { &x[..n - 1] } else { x };
                }
                break;
            }
        }
    }
    if w.len() > 3 && w.ends_with('e') {
        w = &w[..w.len() - 1];
    }
    Cow::Borrowed(w)
}

/// Calls `f` with the hash of every token of `text`, in order.
pub fn for_each_token(text: &str, opts: TokenizerOptions, mut f: impl FnMut(u64)) {
    let mut word = String::new();
    let mut prev_cjk: Option<char> = None;
    let mut cjk_run = 0usize;
    let flush_word = |word: &mut String, f: &mut dyn FnMut(u64)| {
        if word.is_empty() {
            return;
        }
        if !(opts.stop_words && STOP_WORDS.contains(&word.as_str())) {
            if opts.stem {
                f(hash_token(&stem(word)));
            } else {
                f(hash_token(word));
            }
        }
        word.clear();
    };
    let flush_cjk = |prev: &mut Option<char>, run: &mut usize, f: &mut dyn FnMut(u64)| {
        if *run == 1 {
            if let Some(c) = *prev {
                let mut buf = [0u8; 4];
                f(hash_token(c.encode_utf8(&mut buf)));
            }
        }
        *prev = None;
        *run = 0;
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut f);
            if let Some(p) = prev_cjk {
                let mut buf = [0u8; 8];
                let n = p.encode_utf8(&mut buf).len();
                let m = c.encode_utf8(&mut buf[n..]).len();
                f(fnv(&buf[..n + m], FNV_OFFSET));
            }
            prev_cjk = Some(c);
            cjk_run += 1;
        } else if c.is_alphanumeric() {
            flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
            word.extend(c.to_lowercase());
        } else if c == '\'' || c == '’' {
            // Inside a word an apostrophe joins: "don't" is one token.
        } else {
            flush_word(&mut word, &mut f);
            flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
        }
    }
    flush_word(&mut word, &mut f);
    flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
}

/// The token hashes of `text`, in order.
pub fn tokens(text: &str, opts: TokenizerOptions) -> Vec<u64> {
    let mut out = Vec::new();
    for_each_token(text, opts, |t| out.push(t));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: TokenizerOptions = TokenizerOptions { stop_words: false, stem: false };

    fn h(words: &[&str]) -> Vec<u64> {
        words.iter().map(|w| hash_token(w)).collect()
    }

    #[test]
    fn words_are_lower_cased_alphanumeric_runs() {
        assert_eq!(tokens("Hello, World! It's 2024.", PLAIN), h(&["hello", "world", "its", "2024"]));
        assert_eq!(tokens("Café—naïve", PLAIN), h(&["café", "naïve"]));
        assert!(tokens("  ...  ", PLAIN).is_empty());
    }

    #[test]
    fn chinese_runs_give_bigrams_and_lone_characters() {
        assert_eq!(tokens("我喜欢茶", PLAIN), h(&["我喜", "喜欢", "欢茶"]));
        assert_eq!(tokens("茶", PLAIN), h(&["茶"]));
        // Mixed scripts split at the boundary.
        assert_eq!(tokens("用neovim写代码", PLAIN), h(&["用", "neovim", "写代", "代码"]));
        // A query word of two characters meets the memory's bigram.
        let memory = tokens("用户住在上海", PLAIN);
        assert!(memory.contains(&hash_token("上海")));
    }

    #[test]
    fn stop_words_and_stems_fold_english() {
        let opts = TokenizerOptions { stop_words: true, stem: true };
        assert_eq!(tokens("She played the games", opts), h(&["play", "gam"]));
        assert_eq!(tokens("playing plays play", opts), h(&["play", "play", "play"]));
        for group in [&["hike", "hiked", "hiking", "hikes"][..], &["story", "stories"], &["run", "running", "runs"], &["box", "boxes"], &["match", "matches"]] {
            let stems: Vec<String> = group.iter().map(|w| stem(w).into_owned()).collect();
            assert!(stems.windows(2).all(|p| p[0] == p[1]), "{group:?} -> {stems:?}");
        }
        assert_eq!(stem("glass"), "glass");
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("analysis"), "analysis");
    }
}
