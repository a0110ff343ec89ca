//! What 8-bit weights would save: the cost of one all-MiniLM-L6-v2 layer's four matrix products
//! for a 20-piece sentence with f32 weights (what the model runs today) beside the same products
//! with weights quantised to 8 bits (candle's Q8_0 kernels, which quantise the activations too),
//! and how far the 8-bit products drift from the f32 ones. Not a benchmark of the product:
//! `cargo run --release -p agent_memory_embed --example quantized`.
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

fn time(n: usize, f: impl Fn() -> Tensor) -> f64 {
    f();
    let t = std::time::Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_secs_f64() * 1000.0 / n as f64
}

fn main() {
    let d = Device::Cpu;
    let pieces = 20;
    // (out, in) of the layer's products: query, key and value, the attention output, the two
    // feed-forward halves.
    let shapes = [(384, 384), (384, 384), (384, 384), (384, 384), (1536, 384), (384, 1536)];
    let (mut f32_ms, mut q8_ms, mut worst) = (0.0, 0.0, 1.0f64);
    for (out, inp) in shapes {
        let x = Tensor::randn(0f32, 1.0, (pieces, inp), &d).unwrap();
        let w = (Tensor::randn(0f32, 1.0, (out, inp), &d).unwrap() * 0.05).unwrap();
        let wt = w.t().unwrap().contiguous().unwrap();
        let q = QMatMul::from_qtensor(QTensor::quantize(&w, GgmlDType::Q8_0).unwrap()).unwrap();
        f32_ms += time(300, || x.matmul(&wt).unwrap());
        q8_ms += time(300, || q.forward(&x).unwrap());
        let a = x.matmul(&wt).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let b = q.forward(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (ra, rb) in a.chunks(out).zip(b.chunks(out)) {
            let dot: f64 = ra.iter().zip(rb).map(|(x, y)| (*x as f64) * (*y as f64)).sum();
            let na: f64 = ra.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
            let nb: f64 = rb.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
            worst = worst.min(dot / (na * nb));
        }
    }
    println!(
        "one layer's products, {pieces} pieces: f32 {f32_ms:.3} ms, 8-bit (Q8_0) {q8_ms:.3} ms; six layers: f32 {:.2} ms, 8-bit {:.2} ms",
        f32_ms * 6.0,
        q8_ms * 6.0
    );
    println!("worst cosine of an 8-bit product's row to the f32 one: {worst:.6}");
}
