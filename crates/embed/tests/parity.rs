//! Parity with sentence-transformers: every turn and question of the eval conversations
//! (`../shared/eval`, whose `.f32` files are sentence-transformers' all-MiniLM-L6-v2 vectors) is
//! embedded here and compared with its reference vector. Also: texts longer than the tokenizer
//! file's 128 and than the model's 256 word pieces.
//!
//! The model folder is `AGENT_MEMORY_MODEL_DIR`, else the one `scripts/setup.sh` installs
//! (`$(pg_config --sharedir)/agent_memory/models/all-MiniLM-L6-v2`); the eval data is
//! `AGENT_MEMORY_EVAL_DIR`, else `../shared/eval/conversations` beside the clone. Run in release
//! (`cargo test --release -p agent_memory_embed`): a debug build of the model is very slow.

use std::path::PathBuf;

use agent_memory_embed::{Model, Options};

fn model_dir() -> PathBuf {
    if let Ok(d) = std::env::var("AGENT_MEMORY_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let out = std::process::Command::new("pg_config").arg("--sharedir").output().expect("pg_config --sharedir");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("agent_memory/models/all-MiniLM-L6-v2")
}

fn eval_dir() -> Option<PathBuf> {
    let d = std::env::var("AGENT_MEMORY_EVAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval/conversations"));
    if d.is_dir() {
        Some(d)
    } else if std::env::var("CI").is_ok() {
        panic!("the eval conversations are not at {} (CI has ../shared)", d.display());
    } else {
        eprintln!("skipped: the eval conversations are not at {} (a clone without ../shared)", d.display());
        None
    }
}

fn load() -> Model {
    let dir = model_dir();
    Model::load(&dir, Options::default()).unwrap_or_else(|e| panic!("{e} (scripts/setup.sh installs the model)"))
}

fn reference(path: &std::path::Path, n: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len(), n * 384 * 4, "{}", path.display());
    bytes.chunks(384 * 4).map(|row| row.chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()).collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Every eval text (turns and questions of the five conversations) with its reference vector; at
/// most `limit` of them, spread over every conversation.
fn eval_texts(dir: &std::path::Path, limit: usize) -> Vec<(String, Vec<f32>)> {
    let mut out = Vec::new();
    for i in 1..=5 {
        let conv: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(format!("conversation-{i}.json"))).unwrap()).unwrap();
        let turns: Vec<&str> = conv["turns"].as_array().unwrap().iter().map(|t| t["text"].as_str().unwrap()).collect();
        let questions: Vec<&str> = conv["questions"].as_array().unwrap().iter().map(|q| q["question"].as_str().unwrap()).collect();
        for (texts, file) in [(&turns, "turns"), (&questions, "questions")] {
            let want = reference(&dir.join(format!("conversation-{i}.{file}.f32")), texts.len());
            out.extend(texts.iter().map(|t| t.to_string()).zip(want));
        }
    }
    let every = out.len().div_ceil(limit.max(1));
    out.into_iter().step_by(every).collect()
}

/// Embeds `texts` with `options` and checks each against its reference: cosine ≥ `floor`. Gives
/// the least and the mean cosine.
fn parity(options: Options, texts: &[(String, Vec<f32>)], floor: f64, what: &str) -> (f64, f64) {
    let model = Model::load(&model_dir(), options).unwrap_or_else(|e| panic!("{e} (scripts/setup.sh installs the model)"));
    assert_eq!(model.dims(), 384);
    let refs: Vec<&str> = texts.iter().map(|(t, _)| t.as_str()).collect();
    let got = model.embed::<agent_memory_embed::EmbedError>(&refs, || Ok(())).unwrap();
    let (mut worst, mut sum) = (1.0f64, 0.0f64);
    for ((t, want), g) in texts.iter().zip(&got) {
        let c = cosine(g, want);
        assert!(c >= floor, "{what}: cosine {c:.6} for {t:?}");
        worst = worst.min(c);
        sum += c;
    }
    let mean = sum / texts.len() as f64;
    eprintln!("parity, {what}: {} texts, cosine min {worst:.7}, mean {mean:.7}", texts.len());
    (worst, mean)
}

#[test]
fn every_turn_and_question_matches_sentence_transformers() {
    let Some(dir) = eval_dir() else { return };
    let texts = eval_texts(&dir, usize::MAX);
    assert!(texts.len() > 3000);
    let (worst, _) = parity(Options::default(), &texts, 0.999, "exact (f32)");
    assert!(worst > 0.999_999, "the exact path is sentence-transformers' to rounding: {worst}");
}

/// The 8-bit path holds parity on every kernel this CPU runs: the fast ones on every eval text,
/// the portable one (slow: it is never chosen for speed, only where no other runs) on 300 of them.
#[test]
fn the_fast_path_holds_parity_on_every_kernel_this_cpu_runs() {
    let Some(dir) = eval_dir() else { return };
    let all = eval_texts(&dir, usize::MAX);
    let some = eval_texts(&dir, 300);
    for kernel in agent_memory_embed::q8::Kernel::available() {
        let texts = if Some(kernel) == agent_memory_embed::q8::Kernel::fast() { &all } else { &some };
        parity(Options { kernel: Some(kernel), ..Options::default() }, texts, 0.999, &format!("8-bit, {} kernel", kernel.name()));
    }
}

#[test]
fn long_texts_are_cut_at_the_models_length_not_the_tokenizer_files() {
    let model = load();
    let words: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
    let long = words.join(" ");
    // The tokenizer file says 128; the model reads 256 word pieces.
    assert_eq!(model.tokens(&long).unwrap(), 256);
    let mid: String = words[..90].join(" "); // between 128 and 256 word pieces
    let n = model.tokens(&mid).unwrap();
    assert!(n > 128 && n < 256, "{n}");
    // Words past the 256th piece change nothing; words before it do.
    let mut longer = long.clone();
    longer.push_str(" and a tail that is cut");
    let e = model.embed::<agent_memory_embed::EmbedError>(&[long.as_str(), longer.as_str(), mid.as_str()], || Ok(())).unwrap();
    assert!(cosine(&e[0], &e[1]) > 0.999_999, "text past 256 pieces must be cut");
    assert!(cosine(&e[0], &e[2]) < 0.9999, "the first 256 pieces all count");
    // A batch gives what one text at a time gives, in input order.
    for (i, t) in [long.as_str(), longer.as_str(), mid.as_str()].iter().enumerate() {
        let one = model.embed::<agent_memory_embed::EmbedError>(&[t], || Ok(())).unwrap();
        assert!(cosine(&one[0], &e[i]) > 0.999_99);
        let norm: f64 = one[0].iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
}

#[test]
fn the_windows_of_a_long_text_are_embedded_as_texts_of_their_own() {
    let model = load();
    type E = agent_memory_embed::EmbedError;
    // Words the tokenizer keeps whole, one piece each, so every window starts and ends on a word.
    let vocabulary = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "park", "with", "red", "ball"];
    let words: Vec<&str> = (0..700).map(|i| vocabulary[(i * 7 + i / 5) % vocabulary.len()]).collect();
    let long = words.join(" ");
    let short = words[..100].join(" ");
    let w = model.embed_windows::<E>(&[long.as_str(), short.as_str()], 8, || Ok(())).unwrap();
    // 254 pieces a window (256 with [CLS] and [SEP]), each 32 before the end of the last: the
    // first is the text's own embedding, then 222 new pieces a window: 700 words need 3 more.
    assert_eq!(w[0].len(), 3, "windows of a 700-word text");
    assert!(w[1].is_empty(), "a text the model reads whole has no further window");
    let step = 254 - agent_memory_embed::WINDOW_OVERLAP;
    for (k, v) in w[0].iter().enumerate() {
        let from = step * (k + 1);
        let own = words[from..(from + 254).min(words.len())].join(" ");
        let alone = model.embed::<E>(&[own.as_str()], || Ok(())).unwrap();
        assert!(cosine(v, &alone[0]) > 0.999_99, "window {k} is the embedding of its own words: {}", cosine(v, &alone[0]));
    }
    // At most max_windows; none when it is 0; a batch gives what one text at a time gives.
    assert_eq!(model.embed_windows::<E>(&[long.as_str()], 2, || Ok(())).unwrap()[0].len(), 2);
    assert!(model.embed_windows::<E>(&[long.as_str()], 0, || Ok(())).unwrap()[0].is_empty());
    let one = model.embed_windows::<E>(&[long.as_str()], 8, || Ok(())).unwrap();
    for (a, b) in one[0].iter().zip(&w[0]) {
        assert!(cosine(a, b) > 0.999_99);
    }
    // The text's own embedding is what it was without windows: its first 256 pieces.
    let first = words[..254].join(" ");
    let e = model.embed::<E>(&[long.as_str(), first.as_str()], || Ok(())).unwrap();
    assert!(cosine(&e[0], &e[1]) > 0.999_99);
}

#[test]
fn a_missing_folder_names_the_file() {
    let err = Model::load(std::path::Path::new("/nonexistent/model"), Options::default()).err().unwrap();
    assert!(err.to_string().contains("/nonexistent/model/config.json"), "{err}");
}
