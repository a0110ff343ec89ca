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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

    /// The kernel that makes the 8-bit path faster than f32 on this CPU, if any (the portable
    /// one is not: its integer sums are not vectorised, and `gemm`'s f32 kernels are).
    pub fn fast() -> Option<Kernel> {
        Some(Kernel::best()).filter(|k| *k != Kernel::Portable)
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

/// A block's scale and its inverse, from its largest magnitude (an empty block: 0 and 0).
fn scales(max: f32) -> (f32, f32) {
    (max / 127.0, if max > 0.0 { 127.0 / max } else { 0.0 })
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

    /// Quantises `x` (`rows × cols`, row-major) into this buffer, replacing what it held, on
    /// `kernel` (both kernels give the same values).
    pub fn fill(&mut self, x: &[f32], kernel: Kernel) {
        let n = x.len();
        assert!(n.is_multiple_of(self.cols));
        self.q.resize(n, 0);
        self.abs.resize(n, 0);
        self.scales.resize(n / STEP * 8, 0.0);
        match kernel {
            Kernel::Portable => self.fill_portable(x),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::Avx2` is only made where the CPU has AVX2 and FMA; the buffers were
            // sized for x above.
            Kernel::Avx2 => unsafe { avx2::fill(x, &mut self.q, &mut self.abs, &mut self.scales) },
        }
    }

    fn fill_portable(&mut self, x: &[f32]) {
        for (b, block) in x.chunks_exact(BLOCK).enumerate() {
            let max = block.iter().fold(0f32, |m, v| if v.abs() > m { v.abs() } else { m });
            let (scale, inv) = scales(max);
            for (i, v) in block.iter().enumerate() {
                // Rounded half away from zero, by a truncating conversion, as the AVX2 kernel does.
                let t = v * inv;
                let q = ((t + 0.5f32.copysign(t)) as i32).clamp(-127, 127) as i8;
                self.q[b * BLOCK + i] = q;
                self.abs[b * BLOCK + i] = q.unsigned_abs();
            }
            self.scales[(b / 2) * 8 + (b % 2) * 4..][..4].fill(scale);
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
        rows.fill(&w[..out * inp], Kernel::Portable);
        // Of each step's 8 lanes of scales, the first block's and the second's.
        let scales = rows.scales.chunks_exact(4).map(|l| l[0]).collect();
        Weights { out, inp, q: rows.q, scales }
    }

    fn row(&self, j: usize) -> (&[i8], &[f32]) {
        let c = self.inp;
        (&self.q[j * c..(j + 1) * c], &self.scales[j * c / BLOCK..(j + 1) * c / BLOCK])
    }
}

/// `y[r][j] += Σ x[r]·w[j]` for every row of `x` and output of `w` (y holds the bias before), on
/// `threads` threads (each takes its share of the rows; a row's sums are the same however the
/// rows are shared out).
pub fn product(kernel: Kernel, x: &Rows, w: &Weights, y: &mut [f32], threads: usize) {
    assert_eq!(x.cols, w.inp);
    let rows = x.rows();
    assert!(y.len() >= rows * w.out);
    let share = rows.div_ceil(threads.max(1)).max(8);
    if share >= rows {
        return rows_product(kernel, x, w, &mut y[..rows * w.out], 0..rows);
    }
    std::thread::scope(|s| {
        for (i, part) in y[..rows * w.out].chunks_mut(share * w.out).enumerate() {
            let range = i * share..(i * share + share).min(rows);
            s.spawn(move || rows_product(kernel, x, w, part, range));
        }
    });
}

/// The rows `range` of the product; `y` holds those rows only.
fn rows_product(kernel: Kernel, x: &Rows, w: &Weights, y: &mut [f32], range: std::ops::Range<usize>) {
    match kernel {
        Kernel::Portable => portable(x, w, y, range),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Avx2` is only made where the CPU has AVX2 and FMA (`Kernel::best`).
        Kernel::Avx2 => unsafe { avx2::product(x, w, y, range) },
    }
}

fn portable(x: &Rows, w: &Weights, y: &mut [f32], range: std::ops::Range<usize>) {
    let (cols, base) = (x.cols, range.start);
    for r in range {
        let (xq, _, xs) = x.row(r);
        for j in 0..w.out {
            let (wq, ws) = w.row(j);
            let mut acc = 0f32;
            for b in 0..cols / BLOCK {
                let dot: i32 = xq[b * BLOCK..][..BLOCK].iter().zip(&wq[b * BLOCK..][..BLOCK]).map(|(a, c)| *a as i32 * *c as i32).sum();
                let lane = (b / 2) * 8 + (b % 2) * 4;
                acc += dot as f32 * (xs[lane] * ws[b]);
            }
            y[(r - base) * w.out + j] += acc;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{scales, Rows, Weights, BLOCK, STEP};
    use std::arch::x86_64::*;

    /// `Rows::fill_portable`, 16 values at a time.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fill(x: &[f32], q: &mut [i8], abs: &mut [u8], lanes: &mut [f32]) {
        let sign = _mm256_set1_ps(-0.0);
        let half = _mm256_set1_ps(0.5);
        for b in 0..x.len() / BLOCK {
            // SAFETY: the caller sized q and abs as x, and lanes to 8 per 32 values.
            let p = x.as_ptr().add(b * BLOCK);
            let (v0, v1) = (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
            let m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
            let (scale, inv) = scales(_mm_cvtss_f32(m));
            let iv = _mm256_set1_ps(inv);
            let (t0, t1) = (_mm256_mul_ps(v0, iv), _mm256_mul_ps(v1, iv));
            let r0 = _mm256_cvttps_epi32(_mm256_add_ps(t0, _mm256_or_ps(half, _mm256_and_ps(sign, t0))));
            let r1 = _mm256_cvttps_epi32(_mm256_add_ps(t1, _mm256_or_ps(half, _mm256_and_ps(sign, t1))));
            // 16 × i32 → 16 × i8 in order (packs work within 128-bit halves; the permute puts the
            // halves back in order), saturating at ±127 as the portable clamp does (|t| ≤ 127.5).
            let s16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0b11_01_10_00);
            let s8 = _mm_packs_epi16(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
            let s8 = _mm_max_epi8(s8, _mm_set1_epi8(-127));
            _mm_storeu_si128(q.as_mut_ptr().add(b * BLOCK) as *mut __m128i, s8);
            _mm_storeu_si128(abs.as_mut_ptr().add(b * BLOCK) as *mut __m128i, _mm_abs_epi8(s8));
            lanes[(b / 2) * 8 + (b % 2) * 4..][..4].fill(scale);
        }
    }

    /// Rows taken together: each step of a weight row is loaded once for this many of them.
    const TILE: usize = 6;
    /// Outputs taken together: their weights (about 600 bytes each for 384 inputs, 2.4 KB for
    /// 1,536) stay in the first-level cache while a block of rows passes over them.
    const OUTPUTS: usize = 16;
    /// Rows taken together: their quantised values (3 bytes each: value, magnitude, scale) stay in
    /// the second-level cache while every block of outputs passes over them.
    const ROWS: usize = 64;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn product(x: &Rows, w: &Weights, y: &mut [f32], range: std::ops::Range<usize>) {
        let (rows, base) = (range.end, range.start);
        let mut r0 = base;
        while r0 < rows {
            let r1 = (r0 + ROWS).min(rows);
            let mut j0 = 0;
            while j0 < w.out {
                let j1 = (j0 + OUTPUTS).min(w.out);
                let mut r = r0;
                while r + TILE <= r1 {
                    tile::<TILE>(x, w, y, base, r, j0..j1);
                    r += TILE;
                }
                while r < r1 {
                    tile::<1>(x, w, y, base, r, j0..j1);
                    r += 1;
                }
                j0 = j1;
            }
            r0 = r1;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile<const R: usize>(x: &Rows, w: &Weights, y: &mut [f32], base: usize, r0: usize, outputs: std::ops::Range<usize>) {
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
                y[(r0 + i - base) * w.out + j] += _mm_cvtss_f32(h);
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
        xr.fill(&x, Kernel::Portable);
        let wq = Weights::new(&w, out, inp);
        let exact: Vec<f32> = (0..rows)
            .flat_map(|r| (0..out).map(|j| (0..inp).map(|k| x[r * inp + k] * w[j * inp + k]).sum::<f32>()).collect::<Vec<_>>())
            .collect();
        let mut first: Option<Vec<f32>> = None;
        for k in Kernel::available() {
            let mut y = vec![1.0f32; rows * out];
            product(k, &xr, &wq, &mut y, 1);
            let mut shared = vec![1.0f32; rows * out];
            product(k, &xr, &wq, &mut shared, 3);
            assert_eq!(shared, y, "{} kernel: rows shared out over threads", k.name());
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
        r.fill(&x, Kernel::Portable);
        let (q, a, s) = r.row(0);
        assert_eq!(q[3], -127);
        assert_eq!(a[3], 127);
        assert!((q[3] as f32 * s[0] + 2.5).abs() < 1e-6);
        assert!(q[16..].iter().all(|v| *v == 0) && s[4] == 0.0, "an empty block has scale 0");
    }

    #[test]
    fn every_kernel_quantises_alike() {
        let mut x = values(64 * 5, 3);
        x[7] = 0.5 * (x[0].abs() + 1.0); // ties and extremes
        x[40] = -1e-30;
        x[96..128].fill(0.0);
        let mut want = Rows::new(64);
        want.fill(&x, Kernel::Portable);
        for k in Kernel::available() {
            let mut got = Rows::new(64);
            got.fill(&x, k);
            assert_eq!(got.q, want.q, "{} kernel", k.name());
            assert_eq!(got.abs, want.abs, "{} kernel", k.name());
            assert_eq!(got.scales, want.scales, "{} kernel", k.name());
        }
    }
}
