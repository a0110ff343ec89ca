//! Packed embeddings: a user's memories quantised to 8 bits and stored many to a page, so that
//! recall reads one page per dozen memories instead of one heap page per memory, and reads the
//! exact embedding only of the memories that can still make the result.
//!
//! Each embedding `x` is stored as a scale `s`, codes `c` (`i8`, `|cᵢ| ≤ 127`), its norm `|x|`
//! and the norm of the rounding error `|e|` where `x = s·c + e`. For a query `q`,
//!
//! ```text
//! q·x = s·(q·c) + q·e   and   |q·e| ≤ |q|·|e|     (Cauchy–Schwarz)
//! ```
//!
//! so the cosine `q·x / (|q|·|x|)` lies within `(s·(q·c) ± |q|·|e|) / (|q|·|x|)`, widened by a
//! margin for floating-point rounding ([`Query::margin`]). Recall uses the upper end to decide
//! which memories it must read exactly: a memory whose bound is below the score of the last
//! result kept cannot enter the result. Results are therefore exact, whatever the data.
//!
//! A pack is a byte string: a 12-byte header (format, dimensions, count) and `count` entries in
//! ascending id, each `id i64, importance f32, scale f32, norm f32, error f32, codes [i8; dims]`,
//! little-endian.
//!
//! Words packs ([`WordsWriter`], [`Words`]) hold the keyword facts of the same memories in the
//! same order, as many to a pack as fit: what the keyword channel of recall counts and filters
//! by (length, distinct terms with their counts, kind, archiving, end of validity), so that
//! hybrid recall can count a memory's words without reading its row. Each is inverted, so a
//! question's few terms are looked up rather than every memory's terms read: a 16-byte header
//! (format, flags: the tokenizer options, memories, terms, postings), then each memory's facts
//! (`id i64, len u32, kind u8, flags u8, 2 bytes, ends_at i64`), then the pack's distinct terms
//! in ascending order (`token u64, first posting u32`; see [`crate::keyword::doc_terms`]), then
//! the postings (`memory's place u16, count u16`), term by term. Vector-only recall never reads
//! them.

/// The format byte of packs this code writes.
use crate::text::TokenizerOptions;

pub const FORMAT: u8 = 1;
const HEADER: usize = 12;
const ENTRY_FIXED: usize = 24;

/// Bytes of one entry for `dims` dimensions.
pub fn entry_size(dims: usize) -> usize {
    ENTRY_FIXED + dims
}

/// How many entries fit in a pack of at most `max_bytes` (0 when not even one does).
pub fn capacity(dims: usize, max_bytes: usize) -> usize {
    max_bytes.saturating_sub(HEADER) / entry_size(dims)
}

/// One embedding, quantised.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub scale: f32,
    pub norm: f32,
    /// `|x - scale·codes|`, rounded up.
    pub error: f32,
    pub codes: Vec<i8>,
}

/// Quantises `x` to 8 bits with one scale: `codes = round(x / scale)`, `scale = max|xᵢ| / 127`.
pub fn quantize(x: &[f32]) -> Quantized {
    let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = if max > 0.0 && max.is_finite() { max / 127.0 } else { 0.0 };
    let codes: Vec<i8> = x.iter().map(|&v| if scale > 0.0 { (v / scale).round().clamp(-127.0, 127.0) as i8 } else { 0 }).collect();
    let mut err2 = 0f64;
    let mut norm2 = 0f64;
    for (&v, &c) in x.iter().zip(&codes) {
        let d = v as f64 - scale as f64 * c as f64;
        err2 += d * d;
        norm2 += v as f64 * v as f64;
    }
    // Stored as f32, rounded up: an upper bound stays an upper bound.
    let error = up(err2.sqrt() * (1.0 + 1e-6) + 1e-12);
    Quantized { scale, norm: norm2.sqrt() as f32, error, codes }
}

/// The smallest f32 at or above `v` (v ≥ 0).
fn up(v: f64) -> f32 {
    let f = v as f32;
    if (f as f64) < v {
        f32::from_bits(f.to_bits() + 1)
    } else {
        f
    }
}

/// Builds one pack.
pub struct PackWriter {
    dims: usize,
    count: u32,
    buf: Vec<u8>,
}

impl PackWriter {
    pub fn new(dims: usize, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(HEADER + capacity * entry_size(dims));
        buf.extend_from_slice(&[FORMAT, 0, 0, 0]);
        buf.extend_from_slice(&(dims as u32).to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        PackWriter { dims, count: 0, buf }
    }

    /// Appends a memory; ids must come in ascending order.
    pub fn push(&mut self, id: i64, importance: f32, q: &Quantized) {
        debug_assert_eq!(q.codes.len(), self.dims);
        self.buf.extend_from_slice(&id.to_le_bytes());
        self.buf.extend_from_slice(&importance.to_le_bytes());
        self.buf.extend_from_slice(&q.scale.to_le_bytes());
        self.buf.extend_from_slice(&q.norm.to_le_bytes());
        self.buf.extend_from_slice(&q.error.to_le_bytes());
        self.buf.extend(q.codes.iter().map(|&c| c as u8));
        self.count += 1;
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf[8..12].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

/// A pack read in place.
#[derive(Clone, Copy, Debug)]
pub struct Pack<'a> {
    dims: usize,
    count: usize,
    entries: &'a [u8],
}

/// One entry of a pack.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub id: i64,
    pub importance: f32,
    pub scale: f32,
    pub norm: f32,
    pub error: f32,
    /// The codes, each byte an `i8`.
    pub codes: &'a [u8],
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<'a> Pack<'a> {
    /// Reads a pack; `None` when the bytes are not a pack of this format.
    pub fn parse(bytes: &'a [u8]) -> Option<Pack<'a>> {
        if bytes.len() < HEADER || bytes[0] != FORMAT {
            return None;
        }
        let dims = u32::from_le_bytes(bytes[4..8].try_into().ok()?) as usize;
        let count = u32::from_le_bytes(bytes[8..12].try_into().ok()?) as usize;
        let entries = &bytes[HEADER..];
        if dims == 0 || entries.len() != count.checked_mul(entry_size(dims))? {
            return None;
        }
        Some(Pack { dims, count, entries })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The id of entry `i`, without reading the rest.
    pub fn id(&self, i: usize) -> i64 {
        let at = i * entry_size(self.dims);
        i64::from_le_bytes(self.entries[at..at + 8].try_into().expect("8 bytes"))
    }

    pub fn entry(&self, i: usize) -> Entry<'a> {
        let at = i * entry_size(self.dims);
        let e = &self.entries[at..at + entry_size(self.dims)];
        let codes = &e[ENTRY_FIXED..];
        Entry {
            id: i64::from_le_bytes(e[0..8].try_into().expect("8 bytes")),
            importance: f32_at(e, 8),
            scale: f32_at(e, 12),
            norm: f32_at(e, 16),
            error: f32_at(e, 20),
            codes,
        }
    }
}

/// The format byte of words packs this code writes.
pub const WORDS_FORMAT: u8 = 2;
const WORDS_HEADER: usize = 16;
const FACTS: usize = 24;
/// A dictionary entry: the term and where its postings start.
const DICT_ENTRY: usize = 12;
/// A posting: the memory's place in the words pack and the term's count in it.
const POSTING: usize = 4;
/// The `len` of a memory whose terms are not in the words pack (they did not fit).
const NO_TERMS: u32 = u32::MAX;
const FLAG_STOP_WORDS: u8 = 1;
const FLAG_STEM: u8 = 2;
/// Memories per words pack at most: a posting names its memory in 16 bits.
const WORDS_MAX_MEMORIES: usize = u16::MAX as usize;

/// What the keyword channel needs of a memory besides its embedding: its length in tokens, its
/// distinct tokens with their counts (sorted), and the columns recall filters by.
#[derive(Clone, Copy, Debug)]
pub struct KeywordFacts<'a> {
    pub len: u32,
    pub terms: &'a [(u64, u16)],
    /// The caller's code of the memory's kind.
    pub kind: u8,
    pub archived: bool,
    /// When it stops being recalled (`expires_at` or `valid_until`, whichever comes first), in
    /// the caller's unit; `i64::MAX` for never.
    pub ends_at: i64,
}

/// Builds one words pack, up to a size in bytes. Memories go in in id order (as in the
/// embedding packs) until the next one does not fit: then [`WordsWriter::push`] says so, and the
/// caller finishes this pack and starts another.
pub struct WordsWriter {
    opts: TokenizerOptions,
    max_bytes: usize,
    count: u32,
    facts: Vec<u8>,
    /// Each term's postings: (memory's place, count).
    postings: std::collections::BTreeMap<u64, Vec<(u16, u16)>>,
    posted: usize,
}

impl WordsWriter {
    /// A words pack of at most `max_bytes`.
    pub fn new(opts: TokenizerOptions, max_bytes: usize) -> Self {
        WordsWriter { opts, max_bytes, count: 0, facts: Vec::new(), postings: Default::default(), posted: 0 }
    }

    fn size(&self) -> usize {
        WORDS_HEADER + self.facts.len() + self.postings.len() * DICT_ENTRY + self.posted * POSTING
    }

    /// Whether a memory with `terms` would be kept with its terms by an empty pack of this size.
    fn fits_empty(&self, terms: usize) -> bool {
        WORDS_HEADER + FACTS + terms * (DICT_ENTRY + POSTING) <= self.max_bytes
    }

    /// Appends a memory (ids ascending) and returns true, or returns false and appends nothing
    /// when this pack is full: the memory's facts do not fit, or its terms do not fit here but
    /// would in an empty pack. Terms that no pack could hold are left out, and so are the terms
    /// of a memory pushed without `facts`: the memory is marked as having none (a call that
    /// counts words reads its row).
    pub fn push(&mut self, id: i64, facts: Option<&KeywordFacts<'_>>) -> bool {
        let base = self.size() + FACTS;
        if self.count as usize >= WORDS_MAX_MEMORIES || base > self.max_bytes {
            return false;
        }
        let facts = facts.filter(|f| f.len != NO_TERMS);
        let kept = facts.filter(|f| {
            let new = f.terms.iter().filter(|(t, _)| !self.postings.contains_key(t)).count();
            base + f.terms.len() * POSTING + new * DICT_ENTRY <= self.max_bytes
        });
        if kept.is_none() && self.count > 0 && facts.is_some_and(|f| self.fits_empty(f.terms.len())) {
            return false;
        }
        let place = self.count as u16;
        self.facts.extend_from_slice(&id.to_le_bytes());
        match kept {
            Some(f) => {
                self.facts.extend_from_slice(&f.len.to_le_bytes());
                self.facts.push(f.kind);
                self.facts.push(f.archived as u8);
                self.facts.extend_from_slice(&[0, 0]);
                self.facts.extend_from_slice(&f.ends_at.to_le_bytes());
                for &(t, c) in f.terms {
                    self.postings.entry(t).or_default().push((place, c));
                    self.posted += 1;
                }
            }
            None => {
                self.facts.extend_from_slice(&NO_TERMS.to_le_bytes());
                self.facts.extend_from_slice(&[0u8; FACTS - 12]);
            }
        }
        self.count += 1;
        true
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn finish(self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.size());
        let flags = if self.opts.stop_words { FLAG_STOP_WORDS } else { 0 } | if self.opts.stem { FLAG_STEM } else { 0 };
        buf.extend_from_slice(&[WORDS_FORMAT, flags, 0, 0]);
        buf.extend_from_slice(&self.count.to_le_bytes());
        buf.extend_from_slice(&(self.postings.len() as u32).to_le_bytes());
        buf.extend_from_slice(&(self.posted as u32).to_le_bytes());
        buf.extend_from_slice(&self.facts);
        let mut first = 0u32;
        for (t, p) in &self.postings {
            buf.extend_from_slice(&t.to_le_bytes());
            buf.extend_from_slice(&first.to_le_bytes());
            first += p.len() as u32;
        }
        for (place, c) in self.postings.values().flatten() {
            buf.extend_from_slice(&place.to_le_bytes());
            buf.extend_from_slice(&c.to_le_bytes());
        }
        buf
    }
}

/// A words pack read in place: the facts of each memory, then a dictionary of the pack's terms
/// (ascending), each with its postings (the memories that have it, and how often).
#[derive(Clone, Copy, Debug)]
pub struct Words<'a> {
    opts: TokenizerOptions,
    count: usize,
    facts: &'a [u8],
    dict: &'a [u8],
    postings: &'a [u8],
}

/// The keyword facts of one packed memory, read in place (its terms are in the pack's
/// dictionary: [`Words::count_terms`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PackedFacts {
    pub id: i64,
    pub len: u32,
    pub kind: u8,
    pub archived: bool,
    pub ends_at: i64,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl<'a> Words<'a> {
    /// Reads a words pack; `None` when the bytes are not one of this format.
    pub fn parse(bytes: &'a [u8]) -> Option<Words<'a>> {
        if bytes.len() < WORDS_HEADER || bytes[0] != WORDS_FORMAT {
            return None;
        }
        let opts = TokenizerOptions { stop_words: bytes[1] & FLAG_STOP_WORDS != 0, stem: bytes[1] & FLAG_STEM != 0 };
        let count = u32_at(bytes, 4) as usize;
        let terms = u32_at(bytes, 8) as usize;
        let posted = u32_at(bytes, 12) as usize;
        let facts_len = count.checked_mul(FACTS)?;
        let dict_len = terms.checked_mul(DICT_ENTRY)?;
        let body = &bytes[WORDS_HEADER..];
        if count > WORDS_MAX_MEMORIES || body.len() != facts_len.checked_add(dict_len)?.checked_add(posted.checked_mul(POSTING)?)? {
            return None;
        }
        let (facts, rest) = body.split_at(facts_len);
        let (dict, postings) = rest.split_at(dict_len);
        Some(Words { opts, count, facts, dict, postings })
    }

    /// The tokenizer options the terms were made with.
    pub fn options(&self) -> TokenizerOptions {
        self.opts
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The id of memory `i`.
    pub fn id(&self, i: usize) -> Option<i64> {
        self.facts.get(i * FACTS..i * FACTS + 8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// The facts of memory `i`: `None` when its terms are not in the pack.
    pub fn facts(&self, i: usize) -> Option<PackedFacts> {
        let f = self.facts.get(i * FACTS..(i + 1) * FACTS)?;
        let len = u32_at(f, 8);
        if len == NO_TERMS {
            return None;
        }
        Some(PackedFacts { id: u64_at(f, 0) as i64, len, kind: f[12], archived: f[13] & 1 != 0, ends_at: u64_at(f, 16) as i64 })
    }

    fn terms(&self) -> usize {
        self.dict.len() / DICT_ENTRY
    }

    /// The postings of dictionary entry `j`: (memory's place, count) each.
    fn postings_at(&self, j: usize) -> impl Iterator<Item = (usize, u16)> + 'a {
        let first = u32_at(self.dict, j * DICT_ENTRY + 8) as usize;
        let end = if j + 1 < self.terms() { u32_at(self.dict, (j + 1) * DICT_ENTRY + 8) as usize } else { self.postings.len() / POSTING };
        let p = self.postings.get(first * POSTING..end.max(first) * POSTING).unwrap_or(&[]);
        p.chunks_exact(POSTING).map(|b| (u16::from_le_bytes([b[0], b[1]]) as usize, u16::from_le_bytes([b[2], b[3]])))
    }

    /// The first dictionary entry at or after `from` whose term is not below `term`, and whether
    /// it is `term`.
    fn find(&self, term: u64, from: usize) -> (usize, bool) {
        let (mut lo, mut hi) = (from, self.terms());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if u64_at(self.dict, mid * DICT_ENTRY) < term {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo, lo < self.terms() && u64_at(self.dict, lo * DICT_ENTRY) == term)
    }

    /// The postings of `term`: the places of the memories that have it, with its count in each.
    pub fn postings(&self, term: u64) -> impl Iterator<Item = (usize, u16)> + 'a {
        let (j, found) = self.find(term, 0);
        found.then(|| self.postings_at(j)).into_iter().flatten()
    }

    /// Counts `terms` (ascending, distinct) in every memory of the pack at once: the memory at
    /// place `i` has the query terms `hits[starts[i]..starts[i + 1]]`, each as (the term's index
    /// in `terms`, its count), in term order; a memory with none has an empty range. A dictionary
    /// of the pack's terms is searched once per query term, only the memories that have one are
    /// touched, and the memory taken is that of the pack's postings, whatever the question.
    pub fn count_terms(&self, terms: &[u64], hits: &mut Vec<(u16, u16)>, starts: &mut Vec<u32>) {
        hits.clear();
        starts.clear();
        starts.resize(self.count + 1, 0);
        let mut found: Vec<(usize, u16)> = Vec::with_capacity(terms.len().min(self.terms()));
        let mut from = 0usize;
        for (q, &t) in terms.iter().enumerate().take(u16::MAX as usize) {
            // The query terms ascend, so each search starts where the last ended.
            let (j, hit) = self.find(t, from);
            from = j;
            if hit {
                found.push((j, q as u16));
                for (m, _) in self.postings_at(j) {
                    if let Some(n) = starts.get_mut(m + 1) {
                        *n += 1;
                    }
                }
            }
        }
        for i in 0..self.count {
            starts[i + 1] += starts[i];
        }
        hits.resize(starts[self.count] as usize, (0, 0));
        // Each memory's range is filled in query-term order: a counting sort by memory.
        let mut next: Vec<u32> = starts[..self.count].to_vec();
        for (j, q) in found {
            for (m, c) in self.postings_at(j) {
                if let Some(at) = next.get_mut(m) {
                    hits[*at as usize] = (q, c);
                    *at += 1;
                }
            }
        }
    }
}

/// A user's words packs met in id order, one at a time: what recall keeps of the pack it is in
/// (each memory's facts, and the counts of the question's terms in each), so that the pack's row
/// can be let go before the next is read.
#[derive(Default)]
pub struct WordsReader {
    ids: Vec<i64>,
    facts: Vec<Option<PackedFacts>>,
    hits: Vec<(u16, u16)>,
    starts: Vec<u32>,
    at: usize,
    done: bool,
}

/// Where [`WordsReader::lookup`] found a memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lookup {
    /// Its facts, at this place of the pack read ([`WordsReader::facts_at`], [`WordsReader::hits_at`]).
    Found(usize),
    /// Not in the words packs with its terms (or not in them at all).
    Missing,
    /// Past the pack read: load the next ([`WordsReader::load`], or [`WordsReader::finish`] when there is none).
    NeedPack,
}

impl WordsReader {
    /// Takes in the next words pack: its memories' facts, and the counts of `terms` (the
    /// question's, ascending) in each. A pack of another format leaves its memories missing, and
    /// so does one made with other tokenizer options than `opts`.
    pub fn load(&mut self, bytes: &[u8], terms: &[u64], opts: TokenizerOptions) {
        self.ids.clear();
        self.facts.clear();
        self.at = 0;
        let Some(w) = Words::parse(bytes) else {
            return;
        };
        let same = w.options() == opts;
        for i in 0..w.len() {
            self.ids.push(w.id(i).unwrap_or(i64::MIN));
            self.facts.push(w.facts(i).filter(|_| same));
        }
        if same {
            w.count_terms(terms, &mut self.hits, &mut self.starts);
        }
    }

    /// There is no pack after the one read: memories past it are missing.
    pub fn finish(&mut self) {
        self.ids.clear();
        self.facts.clear();
        self.at = 0;
        self.done = true;
    }

    /// Where memory `id` is (ids asked in ascending order; an id asked out of order is missing).
    pub fn lookup(&mut self, id: i64) -> Lookup {
        while self.at < self.ids.len() && self.ids[self.at] < id {
            self.at += 1;
        }
        match self.ids.get(self.at) {
            None if self.done => Lookup::Missing,
            None => Lookup::NeedPack,
            Some(&i) if i == id && self.facts[self.at].is_some() => Lookup::Found(self.at),
            Some(_) => Lookup::Missing,
        }
    }

    /// How many memories the pack read holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The id of the memory at `at`, and whether its facts are in the pack (made with the
    /// options asked for).
    pub fn id_at(&self, at: usize) -> (i64, bool) {
        (self.ids[at], self.facts[at].is_some())
    }

    /// The facts of the memory found at `at`.
    pub fn facts_at(&self, at: usize) -> PackedFacts {
        self.facts[at].expect("a memory found has facts")
    }

    /// The question's terms in the memory found at `at`: (index among the question's terms,
    /// count), in term order.
    pub fn hits_at(&self, at: usize) -> &[(u16, u16)] {
        &self.hits[self.starts[at] as usize..self.starts[at + 1] as usize]
    }
}

/// A query prepared for bounding similarities against packs: quantised too, to 13-bit integers,
/// so that each bound is one exact integer dot product.
///
/// With `q = t·d + f` (codes `d`, `|dᵢ| ≤ 4095`) and `x = s·c + e`:
/// `q·x = t·s·(d·c) + t·(d·e) + f·x`, and `|t·(d·e)| ≤ |t·d|·|e|`, `|f·x| ≤ |f|·|x|`.
pub struct Query {
    codes: Vec<i16>,
    scale: f64,
    /// `|t·d|` and `|f|` (rounded up), and `|q|`.
    coded_norm: f64,
    error: f64,
    norm: f64,
    margin: f64,
}

/// The largest query code: 13 bits, so that `d/16` steps of paired products fit an `i32` lane
/// (`2 · 4095 · 127 · 1000 < 2³¹` for 16,000 dimensions).
const QUERY_CODE_MAX: f32 = 4095.0;

impl Query {
    pub fn new(q: &[f32]) -> Self {
        let max = q.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 && max.is_finite() { max / QUERY_CODE_MAX } else { 0.0 };
        let codes: Vec<i16> =
            q.iter().map(|&v| if scale > 0.0 { (v / scale).round().clamp(-QUERY_CODE_MAX, QUERY_CODE_MAX) as i16 } else { 0 }).collect();
        let (mut coded2, mut err2) = (0f64, 0f64);
        for (&v, &c) in q.iter().zip(&codes) {
            let coded = scale as f64 * c as f64;
            coded2 += coded * coded;
            err2 += (v as f64 - coded) * (v as f64 - coded);
        }
        Query {
            codes,
            scale: scale as f64,
            coded_norm: coded2.sqrt() * (1.0 + 1e-9),
            error: err2.sqrt() * (1.0 + 1e-9) + 1e-300,
            norm: crate::vecmath::norm(q),
            margin: Self::margin(q.len()),
        }
    }

    /// The allowance for rounding, in cosine units: the exact path sums `d` products in 16
    /// float lanes (error at most about `(d/16 + 1)·2⁻²⁴` of the magnitudes summed, which are at
    /// most 1 here); a quarter of `d` units of `f32::EPSILON` covers it, and the rounding of the
    /// stored scale and norms, with room to spare.
    pub fn margin(dims: usize) -> f64 {
        (dims as f64 / 4.0 + 64.0) * f32::EPSILON as f64 + 1e-7
    }

    /// Lower and upper bounds of the cosine similarity of the query and the entry's embedding.
    pub fn bounds(&self, e: &Entry<'_>) -> (f64, f64) {
        if e.norm <= 0.0 || self.norm <= 0.0 || e.codes.len() != self.codes.len() {
            return (-1.0, 1.0);
        }
        let centre = self.scale * e.scale as f64 * dot_codes(&self.codes, e.codes) as f64;
        let spread = self.coded_norm * e.error as f64 + self.error * e.norm as f64;
        let denom = self.norm * e.norm as f64;
        let lo = ((centre - spread) / denom - self.margin).max(-1.0);
        let hi = ((centre + spread) / denom + self.margin).min(1.0);
        (lo, hi)
    }
}

/// The largest value of `s·f` for `s` in `[s_lo, s_hi]` and `f` in `[f_lo, f_hi]`.
pub fn product_upper_bound(s_lo: f64, s_hi: f64, f_lo: f64, f_hi: f64) -> f64 {
    [s_lo * f_lo, s_lo * f_hi, s_hi * f_lo, s_hi * f_hi].into_iter().fold(f64::NEG_INFINITY, f64::max)
}

/// `Σ dᵢ·cᵢ`, exactly, each byte of `c` an `i8` and `|dᵢ| ≤ 4095`.
pub fn dot_codes(d: &[i16], c: &[u8]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { dot_codes_avx2(d, c) };
        }
    }
    dot_codes_portable(d, c)
}

fn dot_codes_portable(d: &[i16], c: &[u8]) -> i64 {
    d.iter().zip(c).map(|(&a, &b)| a as i64 * (b as i8) as i64).sum()
}

/// Sixteen codes a step: sign-extended to 16 bits, multiplied in pairs and added to eight
/// 32-bit lanes (`vpmaddwd`), which cannot overflow for up to 16,000 dimensions (see
/// [`QUERY_CODE_MAX`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_codes_avx2(d: &[i16], c: &[u8]) -> i64 {
    use std::arch::x86_64::*;
    let n = d.len().min(c.len());
    let steps = n / 16;
    let mut acc = _mm256_setzero_si256();
    for i in 0..steps {
        // SAFETY: i*16 + 16 <= n, within both slices; unaligned loads.
        let (cv, dv) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(c.as_ptr().add(i * 16) as *const __m128i)),
                _mm256_loadu_si256(d.as_ptr().add(i * 16) as *const __m256i),
            )
        };
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(cv, dv));
    }
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` is 32 bytes; unaligned store.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, acc) };
    lanes.iter().map(|&v| v as i64).sum::<i64>() + dot_codes_portable(&d[steps * 16..n], &c[steps * 16..n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vecmath;

    struct Lcg(u64);
    impl Lcg {
        fn f(&mut self) -> f32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        fn v(&mut self, d: usize) -> Vec<f32> {
            (0..d).map(|_| self.f()).collect()
        }
    }

    #[test]
    fn the_bounds_contain_the_exact_cosine() {
        let mut r = Lcg(7);
        for &d in &[1usize, 3, 17, 64, 512, 1536] {
            let q = vecmath::normalized(&r.v(d));
            let query = Query::new(&q);
            for i in 0..200 {
                let mut x = r.v(d);
                // Some near the query, some far, some with one dominant element.
                if i % 3 == 0 {
                    for (a, b) in x.iter_mut().zip(&q) {
                        *a = *a * 0.05 + b;
                    }
                }
                if i % 7 == 0 {
                    x[0] = 40.0;
                }
                let x = vecmath::normalized(&x);
                let exact = vecmath::cosine_with_unit(&q, &x);
                let qz = quantize(&x);
                let mut w = PackWriter::new(d, 1);
                w.push(i, 0.5, &qz);
                let bytes = w.finish();
                let p = Pack::parse(&bytes).unwrap();
                let (lo, hi) = query.bounds(&p.entry(0));
                assert!(lo <= exact && exact <= hi, "d={d} i={i}: {lo} <= {exact} <= {hi}");
                assert!(hi - lo < 0.2, "d={d}: the bound is useful ({lo}..{hi})");
            }
        }
    }

    #[test]
    fn the_bound_is_tight_enough_to_skip_most_memories() {
        let mut r = Lcg(11);
        let d = 512;
        let q = vecmath::normalized(&r.v(d));
        let query = Query::new(&q);
        let x = vecmath::normalized(&r.v(d));
        let (lo, hi) = query.bounds(
            &Pack::parse(&{
                let mut w = PackWriter::new(d, 1);
                w.push(1, 0.5, &quantize(&x));
                w.finish()
            })
            .unwrap()
            .entry(0),
        );
        assert!(hi - lo < 0.03, "{lo}..{hi}");
    }

    #[test]
    fn a_pack_round_trips_and_rejects_other_bytes() {
        let mut r = Lcg(3);
        let d = 8;
        let mut w = PackWriter::new(d, capacity(d, 1000));
        for id in [3i64, 9, 12] {
            w.push(id, id as f32 / 20.0, &quantize(&r.v(d)));
        }
        assert_eq!(w.len(), 3);
        let b = w.finish();
        let p = Pack::parse(&b).unwrap();
        assert_eq!((p.len(), p.dims()), (3, 8));
        assert_eq!((0..3).map(|i| p.id(i)).collect::<Vec<_>>(), vec![3, 9, 12]);
        assert_eq!(p.entry(1).importance, 9.0 / 20.0);
        assert!(Pack::parse(&b[..b.len() - 1]).is_none());
        let mut other = b.clone();
        other[0] = 99;
        assert!(Pack::parse(&other).is_none());
        assert!(Pack::parse(&[]).is_none());
        assert_eq!(capacity(512, 7800), (7800 - 12) / 536);
        assert_eq!(capacity(16000, 7800), 0);
    }

    /// Every memory's terms as the pack's dictionary and postings give them back.
    fn terms_of(p: &Words<'_>, i: usize) -> Vec<(u64, u16)> {
        (0..p.terms()).filter_map(|j| p.postings_at(j).find(|&(m, _)| m == i).map(|(_, c)| (u64_at(p.dict, j * DICT_ENTRY), c))).collect()
    }

    #[test]
    fn words_round_trip_and_stay_within_the_budget() {
        let opts = TokenizerOptions { stop_words: false, stem: true };
        let budget = 700;
        let mut w = WordsWriter::new(opts, budget);
        // Terms shared between memories (i % 5) and terms of their own (i * 100 + j).
        let texts: Vec<Vec<(u64, u16)>> = (0..40u64)
            .map(|i| {
                let mut t: Vec<(u64, u16)> =
                    (0..(i % 7)).map(|j| if j % 2 == 0 { (j, 1) } else { (i * 100 + j, (j + 1) as u16) }).collect();
                t.sort_unstable();
                t
            })
            .collect();
        let mut pushed = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let f = KeywordFacts { len: 3 * i as u32, terms: t, kind: (i % 3) as u8, archived: i % 2 == 1, ends_at: i as i64 - 5 };
            if !w.push(10 + i as i64, Some(&f)) {
                break;
            }
            pushed.push(i);
        }
        assert!(pushed.len() > 5 && pushed.len() < texts.len(), "{} memories", pushed.len());
        let full = pushed.len();
        let b = w.finish();
        assert!(b.len() <= budget, "{} bytes", b.len());
        let p = Words::parse(&b).unwrap();
        assert_eq!((p.options(), p.len()), (opts, full));
        for &i in &pushed {
            let f = p.facts(i).unwrap();
            assert_eq!(
                f,
                PackedFacts { id: 10 + i as i64, len: 3 * i as u32, kind: (i % 3) as u8, archived: i % 2 == 1, ends_at: i as i64 - 5 }
            );
            assert_eq!(p.id(i), Some(10 + i as i64));
            assert_eq!(terms_of(&p, i), texts[i]);
        }
        assert!(p.facts(full).is_none() && p.id(full).is_none(), "past the end");
        // A shared term's postings name every memory that has it, in order.
        let with_2: Vec<usize> = pushed.iter().copied().filter(|i| texts[*i].iter().any(|t| t.0 == 2)).collect();
        assert_eq!(p.postings(2).collect::<Vec<_>>(), with_2.iter().map(|&m| (m, 1)).collect::<Vec<_>>());
        assert_eq!(p.postings(7777).count(), 0);
        assert!(Words::parse(&b[..b.len() - 1]).is_none());
        assert!(Words::parse(&[]).is_none());
        let mut other = b.clone();
        other[0] = 1;
        assert!(Words::parse(&other).is_none(), "another format");
    }

    #[test]
    fn a_memory_whose_terms_fit_no_pack_goes_in_without_them() {
        let mut w = WordsWriter::new(TokenizerOptions::default(), 1200);
        let short = [(5u64, 2u16)];
        assert!(w.push(1, Some(&KeywordFacts { len: 2, terms: &short, kind: 0, archived: false, ends_at: 0 })));
        let long: Vec<(u64, u16)> = (0..1000).map(|j| (j, 1)).collect();
        let huge = KeywordFacts { len: 1000, terms: &long, kind: 0, archived: false, ends_at: i64::MAX };
        assert!(w.push(2, Some(&huge)), "no pack could hold its terms: it goes in without them");
        // Terms that would fit an empty pack but not this one's room: the pack is full.
        let mid: Vec<(u64, u16)> = (100..130).map(|j| (j, 1)).collect();
        let some = KeywordFacts { len: 30, terms: &mid, kind: 0, archived: false, ends_at: 0 };
        while w.push(3 + w.len() as i64, Some(&some)) {}
        let n = w.len();
        assert!(n >= 5, "{n} memories");
        let b = w.finish();
        assert!(b.len() <= 1200, "{} bytes", b.len());
        let p = Words::parse(&b).unwrap();
        assert_eq!(terms_of(&p, 0), short);
        assert!(p.facts(1).is_none(), "the memory with too many terms has none");
        assert_eq!(p.id(1), Some(2));
        assert_eq!(terms_of(&p, 2), mid);
    }

    #[test]
    fn counting_the_query_terms_finds_each_memorys_counts() {
        let mut w = WordsWriter::new(TokenizerOptions::default(), 8000);
        let texts: Vec<Vec<(u64, u16)>> = (0..60u64)
            .map(|i| {
                (0..(i % 9))
                    .map(|j| ((i * 7 + j * 13) % 41, (1 + (i + j) % 4) as u16))
                    .collect::<std::collections::BTreeMap<_, _>>()
                    .into_iter()
                    .collect()
            })
            .collect();
        for (i, t) in texts.iter().enumerate() {
            assert!(w.push(i as i64, Some(&KeywordFacts { len: 9, terms: t, kind: 0, archived: false, ends_at: 0 })));
        }
        let b = w.finish();
        let p = Words::parse(&b).unwrap();
        let (mut hits, mut starts) = (vec![(9u16, 9u16)], vec![5u32]);
        for query in [vec![], vec![0u64], vec![3, 5, 40], vec![1, 2, 3, 4, 5, 6, 50], (0..41).collect::<Vec<u64>>()] {
            p.count_terms(&query, &mut hits, &mut starts);
            assert_eq!(starts.len(), texts.len() + 1);
            for (i, t) in texts.iter().enumerate() {
                let want: Vec<(u16, u16)> =
                    query.iter().enumerate().filter_map(|(q, term)| t.iter().find(|x| x.0 == *term).map(|x| (q as u16, x.1))).collect();
                assert_eq!(hits[starts[i] as usize..starts[i + 1] as usize], want, "memory {i}, query {query:?}");
            }
        }
    }

    #[test]
    fn the_reader_walks_the_packs_in_id_order() {
        let opts = TokenizerOptions::default();
        // Memories 0, 2, 4, ... in small packs; memory 6 without terms; one pack of other options.
        let mut packs = Vec::new();
        let mut w = WordsWriter::new(opts, 200);
        for id in (0..40i64).step_by(2) {
            let terms = [(id as u64 % 3, 1u16), (100 + id as u64, 2)];
            let f = KeywordFacts { len: 5, terms: &terms, kind: 1, archived: false, ends_at: id };
            let f = (id != 6).then_some(f);
            if !w.push(id, f.as_ref()) {
                packs.push(
                    std::mem::replace(
                        &mut w,
                        WordsWriter::new(if packs.len() == 1 { TokenizerOptions { stop_words: false, stem: false } } else { opts }, 200),
                    )
                    .finish(),
                );
                assert!(w.push(id, f.as_ref()));
            }
        }
        packs.push(w.finish());
        assert!(packs.len() >= 4);
        let other: Vec<i64> = Words::parse(&packs[2]).map(|w| (0..w.len()).filter_map(|i| w.id(i)).collect()).unwrap();
        let mut r = WordsReader::default();
        let mut next = packs.iter();
        let query = [1u64, 112, 500];
        for id in 0..45i64 {
            let found = loop {
                match r.lookup(id) {
                    Lookup::NeedPack => match next.next() {
                        Some(b) => r.load(b, &query, opts),
                        None => r.finish(),
                    },
                    l => break l,
                }
            };
            if id % 2 == 1 || id == 6 || id >= 40 || other.contains(&id) {
                assert_eq!(found, Lookup::Missing, "memory {id}");
                continue;
            }
            let Lookup::Found(at) = found else { panic!("memory {id}: {found:?}") };
            assert_eq!(r.facts_at(at).ends_at, id);
            let want: Vec<(u16, u16)> =
                [(0u16, (id % 3 == 1) as u16), (1, 2 * (id == 12) as u16)].into_iter().filter(|h| h.1 > 0).collect();
            assert_eq!(r.hits_at(at), want, "memory {id}");
        }
    }

    #[test]
    fn the_integer_dot_product_is_exact() {
        let mut r = Lcg(9);
        for n in [0usize, 1, 15, 16, 17, 100, 512, 16000] {
            let d: Vec<i16> = (0..n).map(|_| (r.f() * 4095.0) as i16).collect();
            let c: Vec<u8> = (0..n).map(|_| ((r.f() * 127.0) as i8) as u8).collect();
            assert_eq!(dot_codes(&d, &c), dot_codes_portable(&d, &c), "n={n}");
        }
        // The extremes, all dimensions at once.
        let d = vec![4095i16; 16000];
        let c = vec![(-127i8) as u8; 16000];
        assert_eq!(dot_codes(&d, &c), -4095 * 127 * 16000);
    }

    #[test]
    fn a_zero_vector_gets_the_widest_bound() {
        let q = Query::new(&[1.0, 0.0]);
        let z = quantize(&[0.0, 0.0]);
        let b = {
            let mut w = PackWriter::new(2, 1);
            w.push(1, 0.0, &z);
            w.finish()
        };
        assert_eq!(q.bounds(&Pack::parse(&b).unwrap().entry(0)), (-1.0, 1.0));
    }

    #[test]
    fn the_product_bound_takes_the_worst_corner() {
        assert_eq!(product_upper_bound(0.2, 0.5, 0.8, 1.2), 0.6);
        assert_eq!(product_upper_bound(-0.5, -0.2, 0.8, 1.2), -0.2 * 0.8);
        assert_eq!(product_upper_bound(-0.5, 0.1, 0.0, 1.0), 0.1);
    }
}
