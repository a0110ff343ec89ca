//! 8-bit products in blocks of 16: the fast path of the linear layers.
//!
//! A weight row (one output) and an activation row are each cut into blocks of 16 values along
//! the inner dimension; each block keeps one f32 scale (its largest magnitude / 127) and 16
//! signed 8-bit values. A product sums, block by block, the exact integer dot product of two
//! blocks times the two scales. Blocks of 16 hold parity with sentence-transformers on the eval
//! texts (docs/benchmarks.md: cosine ≥ 0.9992, where blocks of 32 drop to 0.9988); one scale per
//! row or per tensor does not (0.91–0.985).
//!
//! Kernels, chosen at run time ([`Kernel::best`]): AVX2 (`vpmaddubsw` on |x| and sign(x)·w, the
//! sign trick that keeps unsigned × signed bytes exact, then `vpmaddwd` into 32-bit sums), and a
//! portable one for any CPU. Both give the same integer sums; they differ from each other only in
//! the order their f32 sums are added.

/// Values per block, along the inner dimension.
pub const BLOCK: usize = 16;
/// Bytes one AVX2 step reads of a row: two blocks.
pub const STEP: usize = 32;

/// The kernel a product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }

    /// Every kernel this CPU runs, the portable one first (for tests that compare them).
    pub fn available() -> Vec<Kernel> {
        let mut out = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        if Kernel::best() == Kernel::Avx2 {
            out.push(Kernel::Avx2);
        }
        out
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => "avx2",
        }
    }
}

/// Rows of `cols` values (a multiple of [`STEP`]), quantised by blocks.
pub struct Rows {
    pub cols: usize,
    /// `rows × cols` values in −127..=127.
    q: Vec<i8>,
    /// Their magnitudes (what `vpmaddubsw` multiplies, unsigned).
    abs: Vec<u8>,
    /// For each row and [`STEP`] of it, 8 scales: the first block's 4 times, then the second's 4
    /// times, lined up with the 8 lanes of 32-bit sums the AVX2 kernel makes of a step.
    scales: Vec<f32>,
}

impl Rows {
    pub fn new(cols: usize) -> Rows {
        assert!(cols.is_multiple_of(STEP), "rows of {cols} values are not whole steps of {STEP}");
        Rows { cols, q: Vec::new(), abs: Vec::new(), scales: Vec::new() }
    }

    /// Quantises `x` (`rows × cols`, row-major) into this buffer, replacing what it held.
    pub fn fill(&mut self, x: &[f32]) {
        let n = x.len();
        self.q.resize(n, 0);
        self.abs.resize(n, 0);
        self.scales.resize(n / STEP * 8, 0.0);
        for (b, block) in x.chunks_exact(BLOCK).enumerate() {
            let max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = max / 127.0;
            let inv = if max > 0.0 { 127.0 / max } else { 0.0 };
            for (i, v) in block.iter().enumerate() {
                // Rounded half away from zero, as `f32::round`, by a truncating conversion (which
                // vectorises; `round` is a library call on a baseline x86-64 build).
                let t = v * inv;
                let q = (t + 0.5f32.copysign(t)) as i32;
                let q = q.clamp(-127, 127) as i8;
                self.q[b * BLOCK + i] = q;
                self.abs[b * BLOCK + i] = q.unsigned_abs();
            }
            let lanes = &mut self.scales[(b / 2) * 8 + (b % 2) * 4..][..4];
            lanes.fill(scale);
        }
    }

    pub fn rows(&self) -> usize {
        self.q.len() / self.cols
    }

    fn row(&self, r: usize) -> (&[i8], &[u8], &[f32]) {
        let c = self.cols;
        (&self.q[r * c..(r + 1) * c], &self.abs[r * c..(r + 1) * c], &self.scales[r * c / 4..(r + 1) * c / 4])
    }
}

/// A linear layer's weights (`out × inp`, one row per output) quantised by blocks, with one scale
/// per block (two per step: the kernels spread them over the lanes).
pub struct Weights {
    pub out: usize,
    pub inp: usize,
    q: Vec<i8>,
    scales: Vec<f32>,
}

impl Weights {
    pub fn new(w: &[f32], out: usize, inp: usize) -> Weights {
        let mut rows = Rows::new(inp);
        rows.fill(&w[..out * inp]);
        // Of each step's 8 lanes of scales, the first block's and the second's.
        let scales = rows.scales.chunks_exact(4).map(|l| l[0]).collect();
        Weights { out, inp, q: rows.q, scales }
    }

    fn row(&self, j: usize) -> (&[i8], &[f32]) {
        let c = self.inp;
        (&self.q[j * c..(j + 1) * c], &self.scales[j * c / BLOCK..(j + 1) * c / BLOCK])
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        self.q.len() + 4 * self.scales.len()
    }
}

/// `y[r][j] += Σ x[r]·w[j]` for every row of `x` and output of `w` (y holds the bias before).
pub fn product(kernel: Kernel, x: &Rows, w: &Weights, y: &mut [f32]) {
    assert_eq!(x.cols, w.inp);
    let rows = x.rows();
    assert!(y.len() >= rows * w.out);
    match kernel {
        Kernel::Portable => portable(x, w, y),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only made where the CPU has AVX2 and FMA (`Kernel::best`).
        Kernel::Avx2 => unsafe { avx2::product(x, w, y) },
    }
}

fn portable(x: &Rows, w: &Weights, y: &mut [f32]) {
    let cols = x.cols;
    for r in 0..x.rows() {
        let (xq, _, xs) = x.row(r);
        for j in 0..w.out {
            let (wq, ws) = w.row(j);
            let mut acc = 0f32;
            for b in 0..cols / BLOCK {
                let dot: i32 = xq[b * BLOCK..][..BLOCK].iter().zip(&wq[b * BLOCK..][..BLOCK]).map(|(a, c)| *a as i32 * *c as i32).sum();
                let lane = (b / 2) * 8 + (b % 2) * 4;
                acc += dot as f32 * (xs[lane] * ws[b]);
            }
            y[r * w.out + j] += acc;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Rows, Weights, STEP};
    use std::arch::x86_64::*;

    /// Rows taken together: each step of a weight row is loaded once for this many of them.
    const TILE: usize = 4;
    /// Outputs taken together: their weights (about 400 bytes each for 384 inputs) stay in the
    /// first-level cache while every row passes over them.
    const OUTPUTS: usize = 32;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn product(x: &Rows, w: &Weights, y: &mut [f32]) {
        let rows = x.rows();
        let mut j0 = 0;
        while j0 < w.out {
            let j1 = (j0 + OUTPUTS).min(w.out);
            let mut r = 0;
            while r + TILE <= rows {
                tile::<TILE>(x, w, y, r, j0..j1);
                r += TILE;
            }
            while r < rows {
                tile::<1>(x, w, y, r, j0..j1);
                r += 1;
            }
            j0 = j1;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile<const R: usize>(x: &Rows, w: &Weights, y: &mut [f32], r0: usize, outputs: std::ops::Range<usize>) {
        let steps = x.cols / STEP;
        let ones = _mm256_set1_epi16(1);
        // Lanes 0–3 take a step's first scale, lanes 4–7 its second.
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let xr: [(&[i8], &[u8], &[f32]); R] = std::array::from_fn(|i| x.row(r0 + i));
        for j in outputs {
            let (wq, ws) = w.row(j);
            let mut acc = [_mm256_setzero_ps(); R];
            for s in 0..steps {
                // SAFETY: every row holds `steps` × 32 bytes, its scales `steps` × 8 (activations)
                // or `steps` × 2 (weights).
                let wv = _mm256_loadu_si256(wq.as_ptr().add(s * STEP) as *const __m256i);
                let pair = _mm_castsi128_ps(_mm_loadl_epi64(ws.as_ptr().add(s * 2) as *const __m128i));
                let wsv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(pair), spread);
                for i in 0..R {
                    let (xq, xa, xs) = xr[i];
                    let xv = _mm256_loadu_si256(xq.as_ptr().add(s * STEP) as *const __m256i);
                    let av = _mm256_loadu_si256(xa.as_ptr().add(s * STEP) as *const __m256i);
                    // |x| (unsigned) times sign(x)·w (signed): x·w, pairs summed in 16 bits
                    // (at most 2 × 127 × 127, no saturation), then in fours in 32 bits.
                    let sums = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(wv, xv)), ones);
                    let scale = _mm256_mul_ps(wsv, _mm256_loadu_ps(xs.as_ptr().add(s * 8)));
                    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[i]);
                }
            }
            for (i, a) in acc.iter().enumerate() {
                let h = _mm_add_ps(_mm256_castps256_ps128(*a), _mm256_extractf128_ps(*a, 1));
                let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
                let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
                y[(r0 + i) * w.out + j] += _mm_cvtss_f32(h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 33) as f32 / (1u64 << 31) as f32 - 0.5) * 4.0
            })
            .collect()
    }

    #[test]
    fn every_kernel_gives_the_blocks_product_and_stays_near_the_f32_one() {
        let (rows, inp, out) = (7, 96, 5);
        let x = values(rows * inp, 1);
        let w = values(out * inp, 2);
        let mut xr = Rows::new(inp);
        xr.fill(&x);
        let wq = Weights::new(&w, out, inp);
        let exact: Vec<f32> = (0..rows)
            .flat_map(|r| (0..out).map(|j| (0..inp).map(|k| x[r * inp + k] * w[j * inp + k]).sum::<f32>()).collect::<Vec<_>>())
            .collect();
        let mut first: Option<Vec<f32>> = None;
        for k in Kernel::available() {
            let mut y = vec![1.0f32; rows * out];
            product(k, &xr, &wq, &mut y);
            for (a, e) in y.iter().zip(&exact) {
                assert!((a - 1.0 - e).abs() < 0.05 * (1.0 + e.abs()), "{} kernel: {a} against {}", k.name(), e + 1.0);
            }
            match &first {
                None => first = Some(y),
                Some(f) => {
                    for (a, b) in y.iter().zip(f) {
                        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{} kernel: {a} against the portable {b}", k.name());
                    }
                }
            }
        }
    }

    #[test]
    fn a_block_keeps_its_largest_value_exactly_and_zeros_stay_zero() {
        let mut x = vec![0f32; 32];
        x[3] = -2.5;
        x[5] = 1.0;
        let mut r = Rows::new(32);
        r.fill(&x);
        let (q, a, s) = r.row(0);
        assert_eq!(q[3], -127);
        assert_eq!(a[3], 127);
        assert!((q[3] as f32 * s[0] + 2.5).abs() < 1e-6);
        assert!(q[16..].iter().all(|v| *v == 0) && s[4] == 0.0, "an empty block has scale 0");
    }
}
