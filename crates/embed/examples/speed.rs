//! The embedder's speed in this process, for comparing variants while working on it (the figures
//! of record come from `bench/run.sh embed`): one 20-piece sentence, the eval's turns one at a
//! time and in batches, and long texts (200 word pieces or more: LongMemEval's assistant turns).
//!
//! `cargo run --release -p agent_memory_embed --example speed -- <model folder> <eval folder>`
//! (the eval folder holds `conversations/` and `longmemeval/`).
use std::time::Instant;

use agent_memory_embed::{EmbedError, Model, Options};

fn texts(path: &std::path::Path) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["turns"].as_array().unwrap().iter().map(|t| t["text"].as_str().unwrap().to_string()).collect()
}

/// `KERNEL=portable|avx2` runs the linear layers in 8 bits on that kernel; unset, in f32.
fn kernel() -> Option<agent_memory_embed::q8::Kernel> {
    let k = std::env::var("KERNEL").ok()?;
    agent_memory_embed::q8::Kernel::available().into_iter().find(|x| x.name() == k)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("the model's folder");
    let eval = std::path::PathBuf::from(args.next().expect("the eval folder"));
    let threads = std::env::var("THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(1);
    let model = Model::load(std::path::Path::new(&dir), Options { threads, kernel: kernel(), ..Options::default() }).unwrap();
    let none = || Ok::<(), EmbedError>(());
    let s = "The user said she moved to Lisbon last spring and prefers neovim as her editor now";
    let mut one: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            model.embed(&[s], none).unwrap();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    one.sort_by(f64::total_cmp);
    println!("sentence of {} pieces: p50 {:.2} ms, p10 {:.2} ms", model.tokens(s).unwrap(), one[100], one[20]);

    let turns: Vec<String> = (1..=5).flat_map(|i| texts(&eval.join(format!("conversations/conversation-{i}.json")))).take(640).collect();
    let refs: Vec<&str> = turns.iter().map(String::as_str).collect();
    let t = Instant::now();
    for r in refs.iter().take(160) {
        model.embed(&[*r], none).unwrap();
    }
    println!("eval turns one at a time: {:.0}/s", 160.0 / t.elapsed().as_secs_f64());
    let t = Instant::now();
    model.embed(&refs, none).unwrap();
    println!("eval turns in batches: {:.0}/s ({} turns)", refs.len() as f64 / t.elapsed().as_secs_f64(), refs.len());

    let mut long: Vec<String> = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(eval.join("longmemeval")).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "json")) {
        long.extend(texts(f).into_iter().filter(|t| model.tokens(t).unwrap() >= 200));
        if long.len() >= 96 {
            break;
        }
    }
    long.truncate(96);
    let refs: Vec<&str> = long.iter().map(String::as_str).collect();
    let t = Instant::now();
    model.embed(&refs, none).unwrap();
    println!("long texts (≥ 200 pieces) in batches: {:.1}/s ({} texts)", refs.len() as f64 / t.elapsed().as_secs_f64(), refs.len());
}
