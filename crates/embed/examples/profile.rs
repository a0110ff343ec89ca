//! Embeds one short sentence many times, for a profiler (`perf record`); not a benchmark.
fn main() {
    let dir = std::env::args().nth(1).expect("the model's folder");
    let n: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let model = agent_memory_embed::Model::load(std::path::Path::new(&dir), Default::default()).unwrap();
    let s = "The user said she moved to Lisbon last spring and prefers neovim as her editor now";
    let t = std::time::Instant::now();
    for _ in 0..n {
        model.embed::<agent_memory_embed::EmbedError>(&[s], || Ok(())).unwrap();
    }
    println!("{:.2} ms per sentence", t.elapsed().as_secs_f64() * 1000.0 / n as f64);
}
