//! Shared pieces of the benchmarks: data generation and latency statistics.

use agent_memory_tests::Rng;

/// A unit vector near one of `centers` (clustered data, as real embeddings are).
pub fn clustered(rng: &mut Rng, centers: &[Vec<f32>], spread: f32) -> Vec<f32> {
    let c = &centers[(rng.next_u64() % centers.len() as u64) as usize];
    let v: Vec<f32> = c.iter().map(|x| x + spread * rng.f32()).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

pub fn centers(rng: &mut Rng, n: usize, dims: usize) -> Vec<Vec<f32>> {
    (0..n).map(|_| rng.vector(dims)).collect()
}

/// Percentile of sorted durations, in milliseconds.
pub fn percentile_ms(sorted: &[std::time::Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Prints a Markdown table and returns it.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for r in rows {
        out += &format!("| {} |\n", r.join(" | "));
    }
    print!("{out}");
    out
}
