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
    let b = word.as_bytes();
    // Every rule below removes an ending in s, d, g or e: other words are left as they are.
    if word.len() <= 3 || !word.is_ascii() || !matches!(b[b.len() - 1], b's' | b'd' | b'g' | b'e') {
        return Cow::Borrowed(word);
    }
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

/// For each ASCII byte: its lower-case form when it is a letter or a digit, 1 for an apostrophe
/// (which joins a word), 0 for anything else (which ends one).
static ASCII_WORD: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else if c == b'\'' {
            1
        } else {
            0
        };
        b += 1;
    }
    t
};

/// Whether a lower-cased ASCII word is a stop word (a `match`, compiled to a few comparisons).
fn is_stop_word(w: &[u8]) -> bool {
    if w.len() > 5 {
        return false;
    }
    matches!(
        w,
        b"a" | b"an"
            | b"and"
            | b"are"
            | b"as"
            | b"at"
            | b"be"
            | b"been"
            | b"but"
            | b"by"
            | b"did"
            | b"do"
            | b"does"
            | b"for"
            | b"from"
            | b"had"
            | b"has"
            | b"have"
            | b"he"
            | b"her"
            | b"his"
            | b"i"
            | b"if"
            | b"in"
            | b"is"
            | b"it"
            | b"its"
            | b"me"
            | b"my"
            | b"of"
            | b"on"
            | b"or"
            | b"our"
            | b"she"
            | b"so"
            | b"that"
            | b"the"
            | b"their"
            | b"them"
            | b"then"
            | b"there"
            | b"they"
            | b"this"
            | b"to"
            | b"was"
            | b"we"
            | b"were"
            | b"what"
            | b"when"
            | b"where"
            | b"which"
            | b"who"
            | b"will"
            | b"with"
            | b"you"
            | b"your"
    )
}

/// Emits one finished ASCII word (lower-cased in `word`): `None` when `want` rules it out (it only
/// counts towards the length), else its hash.
fn emit_ascii(word: &[u8], opts: TokenizerOptions, want: &impl Fn(&[u8]) -> bool, f: &mut impl FnMut(Option<u64>)) {
    if word.is_empty() || (opts.stop_words && is_stop_word(word)) {
        return;
    }
    if !want(word) {
        f(None);
        return;
    }
    // ASCII bytes are valid UTF-8.
    let w = std::str::from_utf8(word).expect("ASCII");
    f(Some(if opts.stem { hash_token(&stem(w)) } else { hash_token(w) }));
}

/// Emits one finished word with non-ASCII letters.
fn emit_word(word: &str, opts: TokenizerOptions, f: &mut impl FnMut(Option<u64>)) {
    if word.is_empty() || (opts.stop_words && is_stop_word(word.as_bytes())) {
        return;
    }
    f(Some(if opts.stem { hash_token(&stem(word)) } else { hash_token(word) }));
}

/// Calls `f` with the hash of every token of `text`, in order.
pub fn for_each_token(text: &str, opts: TokenizerOptions, mut f: impl FnMut(u64)) {
    for_each_token_where(text, opts, |_| true, |t| f(t.expect("every word is wanted")));
}

/// Like [`for_each_token`], but an ASCII word (lower-cased, before stemming) for which `want`
/// is false is passed as `None`, unhashed: a scan that only needs some words and the count of
/// all of them (BM25 over a document) skips the stemming and hashing of the others.
pub fn for_each_token_where(text: &str, opts: TokenizerOptions, want: impl Fn(&[u8]) -> bool, mut f: impl FnMut(Option<u64>)) {
    // An ASCII word is built in a small buffer; a longer one, or one with other letters, in `word`.
    let mut ascii = [0u8; 64];
    let mut alen = 0usize;
    let mut word = String::new();
    let mut in_unicode_word = false;
    let mut prev_cjk: Option<char> = None;
    let mut cjk_run = 0usize;
    let flush_cjk = |prev: &mut Option<char>, run: &mut usize, f: &mut dyn FnMut(Option<u64>)| {
        if *run == 1 {
            if let Some(c) = *prev {
                let mut buf = [0u8; 4];
                f(Some(hash_token(c.encode_utf8(&mut buf))));
            }
        }
        *prev = None;
        *run = 0;
    };
    macro_rules! end_word {
        () => {
            if in_unicode_word {
                emit_word(&word, opts, &mut f);
                word.clear();
                in_unicode_word = false;
            } else if alen > 0 {
                emit_ascii(&ascii[..alen], opts, &want, &mut f);
            }
            alen = 0;
        };
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            // ASCII, the common case: no char decoding, no case tables.
            i += 1;
            let lower = ASCII_WORD[b as usize];
            if lower > 1 {
                if cjk_run > 0 {
                    flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
                }
                if in_unicode_word {
                    word.push(lower as char);
                } else if alen < ascii.len() {
                    ascii[alen] = lower;
                    alen += 1;
                } else {
                    // A very long word continues as a general one.
                    word.clear();
                    word.push_str(std::str::from_utf8(&ascii[..alen]).expect("ASCII"));
                    word.push(lower as char);
                    in_unicode_word = true;
                }
            } else if lower == 1 {
                // Inside a word an apostrophe joins: "don't" is one token.
            } else {
                end_word!();
                if cjk_run > 0 {
                    flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
                }
            }
            continue;
        }
        let c = text[i..].chars().next().expect("a char starts here");
        i += c.len_utf8();
        if is_cjk(c) {
            end_word!();
            if let Some(p) = prev_cjk {
                let mut buf = [0u8; 8];
                let n = p.encode_utf8(&mut buf).len();
                let m = c.encode_utf8(&mut buf[n..]).len();
                f(Some(fnv(&buf[..n + m], FNV_OFFSET)));
            }
            prev_cjk = Some(c);
            cjk_run += 1;
        } else if c.is_alphanumeric() {
            if cjk_run > 0 {
                flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
            }
            if !in_unicode_word {
                word.clear();
                word.push_str(std::str::from_utf8(&ascii[..alen]).expect("ASCII"));
                alen = 0;
                in_unicode_word = true;
            }
            word.extend(c.to_lowercase());
        } else if c == '’' {
            // A typographic apostrophe joins too.
        } else {
            end_word!();
            if cjk_run > 0 {
                flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
            }
        }
    }
    if in_unicode_word {
        emit_word(&word, opts, &mut f);
    } else if alen > 0 {
        emit_ascii(&ascii[..alen], opts, &want, &mut f);
    }
    flush_cjk(&mut prev_cjk, &mut cjk_run, &mut f);
}

/// The first two bytes of a lower-cased ASCII word (one byte and a zero for a word of one letter):
/// a word and its stem share them (stemming only removes endings, and "-ies" gives "-y" after
/// at least two letters), so a document word whose prefix no query word has cannot match one.
pub fn prefix2(word: &[u8]) -> [u8; 2] {
    [word.first().copied().unwrap_or(0), word.get(1).copied().unwrap_or(0)]
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
    fn the_filtered_scan_agrees_with_the_full_one() {
        let text = "Caroline's Sunday: she ran 5 km, then 用户住在上海; café crème, and a verylongwordthatgoesonandonandonandonandonandonandonandonandonwithoutend.";
        let opts = TokenizerOptions::default();
        let all = tokens(text, opts);
        let mut filtered = Vec::new();
        for_each_token_where(text, opts, |w| w.starts_with(b"ca") || w.starts_with(b"ve"), |t| filtered.push(t));
        assert_eq!(filtered.len(), all.len(), "the same number of tokens");
        for (f, a) in filtered.iter().zip(&all) {
            if let Some(h) = f {
                assert_eq!(h, a);
            }
        }
        assert!(filtered.iter().flatten().any(|h| *h == hash_token(&stem("carolines"))));
        assert!(filtered.iter().any(|t| t.is_none()), "unwanted ASCII words are not hashed");
        assert!(all.contains(&hash_token("café")) && all.contains(&hash_token("上海")));
        assert_eq!(prefix2(b"flies"), prefix2(stem("flies").as_bytes()));
        assert_eq!(prefix2(b"a"), [b'a', 0]);
    }

    #[test]
    fn stop_words_are_common_english_function_words() {
        for w in ["the", "a", "is", "was", "which", "your"] {
            assert!(is_stop_word(w.as_bytes()), "{w}");
        }
        for w in ["tea", "refund", "thee", "whichever"] {
            assert!(!is_stop_word(w.as_bytes()), "{w}");
        }
    }

    #[test]
    fn stop_words_and_stems_fold_english() {
        let opts = TokenizerOptions { stop_words: true, stem: true };
        assert_eq!(tokens("She played the games", opts), h(&["play", "gam"]));
        assert_eq!(tokens("playing plays play", opts), h(&["play", "play", "play"]));
        for group in [
            &["hike", "hiked", "hiking", "hikes"][..],
            &["story", "stories"],
            &["run", "running", "runs"],
            &["box", "boxes"],
            &["match", "matches"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stem(w).into_owned()).collect();
            assert!(stems.windows(2).all(|p| p[0] == p[1]), "{group:?} -> {stems:?}");
        }
        assert_eq!(stem("glass"), "glass");
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("analysis"), "analysis");
    }
}
