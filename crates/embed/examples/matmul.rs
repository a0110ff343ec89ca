//! How candle's CPU matmul costs with a transposed weight (as candle's Linear does) and with the
//! weight transposed once beforehand; not a benchmark of the product.
use candle_core::{DType, Device, Tensor};
fn main() {
    let d = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (1, 20, 384), &d).unwrap();
    let w = Tensor::randn(0f32, 1.0, (1536, 384), &d).unwrap();
    let wt = w.t().unwrap().contiguous().unwrap();
    let n = 200;
    for (name, f) in [
        ("x · wᵀ (strided)", Box::new(|| x.broadcast_matmul(&w.t().unwrap()).unwrap()) as Box<dyn Fn() -> Tensor>),
        ("x · wt (contiguous)", Box::new(|| x.broadcast_matmul(&wt).unwrap())),
        ("x2d · wt", Box::new(|| x.squeeze(0).unwrap().matmul(&wt).unwrap())),
    ] {
        f();
        let t = std::time::Instant::now();
        for _ in 0..n {
            f();
        }
        println!("{name}: {:.3} ms", t.elapsed().as_secs_f64() * 1000.0 / n as f64);
    }
    let _ = DType::F32;
}
