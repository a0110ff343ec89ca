//! agent_memory's text embedder: a BERT-family sentence model (all-MiniLM-L6-v2 and its kin)
//! loaded from a folder of local files and run on the CPU by its own forward pass
//! ([`encoder`], over the weights' file mapped read-only and shared by every process), computing what
//! sentence-transformers computes: the tokenizer's word pieces truncated to the model's
//! `max_seq_length`, the encoder, mean (or CLS) pooling over the real tokens, and L2
//! normalisation. Nothing is ever downloaded: a missing or broken file is an error naming it.
//!
//! Free of PostgreSQL: the extension (`src/embedder.rs`) owns the models, the settings and the
//! cancel checks; this crate only turns texts into vectors. Its threads never call back.

pub mod encoder;
pub mod q8;

use std::path::{Path, PathBuf};

use encoder::{Config, Encoder};
use tokenizers::Tokenizer;

/// How token vectors become one sentence vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the real (unpadded) tokens: all-MiniLM-L6-v2 and most sentence models.
    Mean,
    /// The first token's vector (`[CLS]`).
    Cls,
}

impl std::str::FromStr for Pooling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            other => Err(format!("unknown pooling \"{other}\" (mean or cls)")),
        }
    }
}

/// What went wrong, with the file it concerns when there is one.
#[derive(Debug)]
pub enum EmbedError {
    /// A file of the model is missing (the folder was not installed).
    Missing(PathBuf),
    /// A file is there but cannot be read as what it should be.
    Broken(PathBuf, String),
    /// The model ran and failed (shapes, memory).
    Failed(String),
}

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbedError::Missing(p) => write!(f, "{} does not exist", p.display()),
            EmbedError::Broken(p, why) => write!(f, "{} cannot be read: {why}", p.display()),
            EmbedError::Failed(why) => write!(f, "the model failed: {why}"),
        }
    }
}

impl std::error::Error for EmbedError {}

fn failed(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Failed(e.to_string())
}

/// How a model is to be run, besides its files.
#[derive(Clone, Debug)]
pub struct Options {
    pub pooling: Pooling,
    /// Word pieces per text, `[CLS]` and `[SEP]` included; longer texts are cut (256 for
    /// all-MiniLM-L6-v2, its `max_seq_length`).
    pub max_tokens: usize,
    /// Threads the matrix products run on (1: the calling thread alone).
    pub threads: usize,
    /// The linear layers in 8 bits on this kernel ([`q8`]), or in f32 (exact) when `None`.
    pub kernel: Option<q8::Kernel>,
}

impl Default for Options {
    fn default() -> Self {
        Options { pooling: Pooling::Mean, max_tokens: 256, threads: 1, kernel: None }
    }
}

/// A loaded sentence model.
pub struct Model {
    encoder: Encoder,
    tokenizer: Tokenizer,
    options: Options,
    dims: usize,
    /// Its weights' file, named when they make no number.
    weights: PathBuf,
}

/// What a panic of a library this crate calls said (a malformed file can make the tokenizer or
/// the forward pass panic instead of returning an error).
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "an unexpected failure".to_string(),
    }
}

/// Texts run through the encoder together at most (sorted by length, so a batch pads little).
pub const BATCH: usize = 32;

/// Word pieces (padding included) run through the encoder together at most, so the pause between
/// two batches, where the caller checks for a cancel, comes within about a second on one core.
pub const BATCH_PIECES: usize = 1024;

/// Texts tokenized together at most, between two of the caller's checks.
const TOKENIZE_BATCH: usize = 256;

/// Word pieces each window of a long text shares with the window before it
/// ([`Model::embed_windows`]): a sentence cut by a window's end is read whole by the next one.
pub const WINDOW_OVERLAP: usize = 32;

/// Bytes of a text's start the tokenizer reads at most, per word piece the model reads: a text is
/// cut to `max(4096, 64 × max_tokens)` bytes before it is tokenized (16 KiB for 256 pieces), at a
/// space when there is one near the cut. The model reads only the first `max_tokens` pieces, and
/// the text before a space is tokenized as it is inside the whole text, so the cut changes
/// nothing for a text whose first 64 × `max_tokens` bytes hold `max_tokens` pieces (any prose:
/// about 4 to 6 bytes a piece); it bounds the time and memory a long text costs.
pub const BYTES_PER_PIECE: usize = 64;

/// The start of `text` the model reads (see `BYTES_PER_PIECE`).
pub fn readable_part(text: &str, max_tokens: usize) -> &str {
    let limit = (BYTES_PER_PIECE * max_tokens).max(4096);
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    // A space among the last 256 bytes: cut there, so no word is cut in two.
    match head.char_indices().rev().take_while(|(i, _)| end - i <= 256).find(|(_, c)| c.is_whitespace()) {
        Some((i, _)) => &text[..i],
        None => head,
    }
}

/// The files of a model's folder: its BERT configuration, its tokenizer and its weights.
const CONFIG: &str = "config.json";
const TOKENIZER: &str = "tokenizer.json";
const WEIGHTS: &str = "model.safetensors";

/// Whether `dir` holds the files a model loads from (it may still fail to load, if one is broken).
pub fn has_files(dir: &Path) -> bool {
    [CONFIG, TOKENIZER, WEIGHTS].iter().all(|f| dir.join(f).is_file())
}

fn file(dir: &Path, name: &str) -> Result<PathBuf, EmbedError> {
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(EmbedError::Missing(p))
    }
}

impl Model {
    /// Loads the model in `dir`: `config.json` (a BERT configuration), `tokenizer.json` and
    /// `model.safetensors`. The tokenizer's own truncation and padding are replaced by
    /// `options.max_tokens` and padding to the longest text of a batch, as sentence-transformers
    /// does (the files of all-MiniLM-L6-v2 say 128 and a fixed 128).
    pub fn load(dir: &Path, options: Options) -> Result<Model, EmbedError> {
        let weights = dir.join(WEIGHTS);
        std::panic::catch_unwind(|| Self::load_files(dir, options))
            .unwrap_or_else(|p| Err(EmbedError::Broken(weights, format!("the model cannot be built from it: {}", panic_text(p)))))
    }

    fn load_files(dir: &Path, options: Options) -> Result<Model, EmbedError> {
        let config_path = file(dir, CONFIG)?;
        let tokenizer_path = file(dir, TOKENIZER)?;
        let weights_path = file(dir, WEIGHTS)?;
        let config =
            Config::parse(&std::fs::read_to_string(&config_path).map_err(|e| EmbedError::Broken(config_path.clone(), e.to_string()))?)
                .map_err(|e| EmbedError::Broken(config_path.clone(), e))?;
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbedError::Broken(tokenizer_path.clone(), e.to_string()))?;
        let max = options.max_tokens.clamp(2, config.max_positions);
        // The stride changes nothing of a text's embedding (its first `max` pieces): only the
        // further windows the tokenizer cuts, which `embed_windows` reads.
        let stride = WINDOW_OVERLAP.min(max.saturating_sub(2) / 2);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max, stride, ..Default::default() }))
            .map_err(|e| EmbedError::Broken(tokenizer_path.clone(), e.to_string()))?;
        tokenizer.with_padding(None);
        let dims = config.hidden;
        let encoder = Encoder::load(&weights_path, config, options.kernel)?;
        Ok(Model {
            encoder,
            tokenizer,
            options: Options { max_tokens: max, threads: options.threads.max(1), ..options },
            dims,
            weights: weights_path,
        })
    }

    /// The dimension of the vectors.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Word pieces of `text` as the model sees it (after truncation), `[CLS]` and `[SEP]` included.
    pub fn tokens(&self, text: &str) -> Result<usize, EmbedError> {
        Ok(self.tokenizer.encode(self.readable(text), true).map_err(failed)?.get_ids().len())
    }

    /// The start of `text` this model reads (`readable_part` at its `max_tokens`).
    pub fn readable<'t>(&self, text: &'t str) -> &'t str {
        readable_part(text, self.options.max_tokens)
    }

    /// The unit-length embeddings of `texts`, in order. `between` runs between batches (the
    /// extension checks for a cancel there) and may stop the call with an error of its own.
    pub fn embed<E: From<EmbedError>>(&self, texts: &[&str], mut between: impl FnMut() -> Result<(), E>) -> Result<Vec<Vec<f32>>, E> {
        let mut encodings = Vec::with_capacity(texts.len());
        for part in texts.chunks(TOKENIZE_BATCH) {
            between()?;
            let cut: Vec<&str> = part.iter().map(|t| self.readable(t)).collect();
            encodings.extend(self.tokenizer.encode_batch(cut, true).map_err(failed)?);
        }
        self.run_all(&encodings, between)
    }

    /// The embeddings of the windows of each text past the model's own (a text's embedding reads
    /// its first `max_tokens` word pieces): up to `max_windows` more windows of as many pieces,
    /// each starting [`WINDOW_OVERLAP`] pieces before the end of the one before, each embedded as
    /// the model embeds a text of those pieces. None for a text the model reads whole. The text
    /// past what the windows can hold is not read (the tokenizer reads at most
    /// `BYTES_PER_PIECE` bytes a piece of them, as for one window).
    pub fn embed_windows<E: From<EmbedError>>(
        &self,
        texts: &[&str],
        max_windows: usize,
        mut between: impl FnMut() -> Result<(), E>,
    ) -> Result<Vec<Vec<Vec<f32>>>, E> {
        let mut windows = Vec::new();
        let mut owners = Vec::new();
        if max_windows > 0 {
            let pieces = self.options.max_tokens.saturating_mul(max_windows + 1);
            for (t, text) in texts.iter().enumerate() {
                between()?;
                let cut = readable_part(text, pieces);
                let mut encoding = self.tokenizer.encode(cut, true).map_err(failed)?;
                for w in encoding.take_overflowing().into_iter().take(max_windows) {
                    owners.push(t);
                    windows.push(w);
                }
            }
        }
        let vectors = self.run_all(&windows, between)?;
        let mut out: Vec<Vec<Vec<f32>>> = vec![Vec::new(); texts.len()];
        for (t, v) in owners.into_iter().zip(vectors) {
            out[t].push(v);
        }
        Ok(out)
    }

    /// The unit-length embeddings of tokenized texts, in order, in batches of similar lengths.
    fn run_all<E: From<EmbedError>>(
        &self,
        encodings: &[tokenizers::Encoding],
        mut between: impl FnMut() -> Result<(), E>,
    ) -> Result<Vec<Vec<f32>>, E> {
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); encodings.len()];
        for chunk in chunks_by_length(&order, |i| encodings[i].get_ids().len()) {
            between()?;
            let batch = chunk.iter().map(|&i| &encodings[i]).collect::<Vec<_>>();
            let vectors = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run(&batch)))
                .unwrap_or_else(|p| Err(failed(format!("the model panicked: {}", panic_text(p)))))?;
            if vectors.iter().flatten().any(|x| !x.is_finite()) {
                return Err(EmbedError::Broken(
                    self.weights.clone(),
                    "the model makes numbers that are not finite (NaN or infinite weights)".into(),
                )
                .into());
            }
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One batch through the encoder: its texts laid end to end, unpadded.
    fn run(&self, batch: &[&tokenizers::Encoding]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let texts: Vec<(&[u32], &[u32])> = batch.iter().map(|e| (e.get_ids(), e.get_type_ids())).collect();
        let hidden = self.encoder.forward(&texts, self.options.threads).map_err(EmbedError::Failed)?;
        let h = self.dims;
        let mut out = Vec::with_capacity(batch.len());
        let mut row = 0;
        for (ids, _) in &texts {
            let rows = &hidden[row * h..(row + ids.len()) * h];
            let pooled = match self.options.pooling {
                Pooling::Cls => rows[..h.min(rows.len())].to_vec(),
                Pooling::Mean => {
                    let mut sum = vec![0f32; h];
                    for r in rows.chunks_exact(h) {
                        for (s, v) in sum.iter_mut().zip(r) {
                            *s += *v;
                        }
                    }
                    let n = ids.len().max(1) as f32;
                    sum.iter().map(|s| s / n).collect()
                }
            };
            out.push(normalized(pooled));
            row += ids.len();
        }
        Ok(out)
    }
}

/// `v` at unit length (a zero vector stays zero).
fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x = (*x as f64 / norm) as f32;
        }
    }
    v
}

/// The batches of texts in length order (`order`, shortest first): at most `BATCH` texts and
/// `BATCH_PIECES` padded word pieces each, and a batch ends before a text that would make padding
/// more than a quarter of its word pieces (every text of a batch is padded to its longest), so a
/// batch never costs much more than its texts one at a time.
fn chunks_by_length(order: &[usize], len: impl Fn(usize) -> usize) -> Vec<&[usize]> {
    let mut out = Vec::new();
    let (mut start, mut real) = (0usize, 0usize);
    for (k, &i) in order.iter().enumerate() {
        let l = len(i).max(1);
        let n = k - start + 1;
        if n > 1 && (n > BATCH || n * l > BATCH_PIECES || 4 * n * l > 5 * (real + l)) {
            out.push(&order[start..k]);
            start = k;
            real = 0;
        }
        real += l;
    }
    if start < order.len() {
        out.push(&order[start..]);
    }
    out
}

#[cfg(test)]
mod chunk_tests {
    use super::*;

    #[test]
    fn batches_keep_padding_under_a_quarter_and_hold_every_text_once() {
        let lens = [3usize, 3, 4, 4, 5, 9, 10, 10, 40, 41, 250];
        let order: Vec<usize> = (0..lens.len()).collect();
        let chunks = chunks_by_length(&order, |i| lens[i]);
        let flat: Vec<usize> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(flat, order);
        for c in &chunks {
            let longest = c.iter().map(|&i| lens[i]).max().unwrap();
            let real: usize = c.iter().map(|&i| lens[i]).sum();
            assert!(c.len() == 1 || 4 * c.len() * longest <= 5 * real, "{c:?}");
            assert!(c.len() <= BATCH);
            assert!(c.len() == 1 || c.len() * longest <= BATCH_PIECES);
        }
        assert_eq!(chunks.last().unwrap(), &[10usize].as_slice(), "the longest text runs alone");
        let many: Vec<usize> = (0..100).collect();
        assert!(chunks_by_length(&many, |_| 7).iter().all(|c| c.len() <= BATCH));
        assert!(chunks_by_length(&many, |_| 200).iter().all(|c| c.len() * 200 <= BATCH_PIECES));
    }

    #[test]
    fn a_long_text_is_cut_at_a_space_and_a_short_one_not_at_all() {
        let short = "a short text";
        assert_eq!(readable_part(short, 256), short);
        let words = "lorem ipsum dolor ".repeat(2000);
        let cut = readable_part(&words, 256);
        assert!(cut.len() <= 64 * 256 && cut.len() > 64 * 256 - 256, "{}", cut.len());
        assert!(words[cut.len()..].starts_with(' '), "cut before a space");
        // Multi-byte text with no space: cut on a character's boundary.
        let wide = "\u{6F22}".repeat(10_000);
        let cut = readable_part(&wide, 256);
        assert!(cut.len() <= 64 * 256 && wide.is_char_boundary(cut.len()));
        // A small max_tokens still reads 4 KiB.
        assert_eq!(readable_part(&words, 2).len(), readable_part(&words[..5000], 2).len());
    }
}
