//! Vector math on embeddings: dot products, norms, cosine similarity and validation.
//!
//! The loops accumulate in eight independent lanes so the compiler vectorises them; sums are
//! finished in `f64`.

use std::fmt;

const LANES: usize = 8;

/// Why an embedding cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorProblem {
    /// No elements at all.
    Empty,
    /// An element is NaN or infinite.
    NotFinite,
    /// Every element is zero: there is no direction to compare.
    Zero,
}

impl fmt::Display for VectorProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VectorProblem::Empty => "the vector is empty",
            VectorProblem::NotFinite => "the vector has a NaN or infinite element",
            VectorProblem::Zero => "the vector is all zeros",
        })
    }
}

/// Checks that `v` can be compared by cosine, and returns its L2 norm.
pub fn validate(v: &[f32]) -> Result<f64, VectorProblem> {
    if v.is_empty() {
        return Err(VectorProblem::Empty);
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(VectorProblem::NotFinite);
    }
    let n = norm(v);
    if n == 0.0 || !n.is_finite() {
        return Err(VectorProblem::Zero);
    }
    Ok(n)
}

/// `Σ aᵢbᵢ` over the common length.
pub fn dot(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let chunks = n / LANES;
    for c in 0..chunks {
        let (x, y) = (&a[c * LANES..c * LANES + LANES], &b[c * LANES..c * LANES + LANES]);
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s: f64 = acc.iter().map(|&v| v as f64).sum();
    for i in chunks * LANES..n {
        s += (a[i] * b[i]) as f64;
    }
    s
}

/// `(Σ aᵢbᵢ, Σ bᵢ²)` in one pass: the cosine of a unit query `a` and a stored `b` needs both.
/// This is recall's inner loop; on x86-64 it runs an AVX2 build of the same code when the CPU has
/// AVX2 (chosen at run time, so the library still runs on any x86-64).
pub fn dot_and_sq_norm(a: &[f32], b: &[f32]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { dot_and_sq_norm_avx2(a, b) };
        }
    }
    dot_and_sq_norm_portable(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_and_sq_norm_avx2(a: &[f32], b: &[f32]) -> (f64, f64) {
    dot_and_sq_norm_portable(a, b)
}

/// 16 independent lanes over exact chunks, so the compiler keeps the loop in vector registers.
#[inline(always)]
fn dot_and_sq_norm_portable(a: &[f32], b: &[f32]) -> (f64, f64) {
    const W: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut d = [0f32; W];
    let mut q = [0f32; W];
    let (ca, cb) = (a.chunks_exact(W), b.chunks_exact(W));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..W {
            d[l] += x[l] * y[l];
            q[l] += y[l] * y[l];
        }
    }
    let mut ds: f64 = d.iter().map(|&v| v as f64).sum();
    let mut qs: f64 = q.iter().map(|&v| v as f64).sum();
    for (x, y) in ra.iter().zip(rb) {
        ds += (x * y) as f64;
        qs += (y * y) as f64;
    }
    (ds, qs)
}

/// `Σ aᵢbᵢ` in 32 lanes, with fused multiply-adds on a CPU that has them: for
/// ranking's pairwise checks, which compare against a threshold with a margin.
pub fn dot_fast(a: &[f32], b: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { dot_avx2_fma(a, b) };
        }
    }
    dot_wide::<false>(a, b)
}

/// `|a - b|²` over the common length, as [`dot_fast`].
pub fn sq_distance_fast(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { sq_distance_avx2_fma(a, b) };
        }
    }
    sq_distance_wide::<false>(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2_fma(a: &[f32], b: &[f32]) -> f64 {
    dot_wide::<true>(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sq_distance_avx2_fma(a: &[f32], b: &[f32]) -> f32 {
    sq_distance_wide::<true>(a, b)
}

/// `Σ aᵢbᵢ` in 32 independent lanes (four AVX2 registers), so additions do not wait on each
/// other; `FUSED` uses fused multiply-adds (only in code built for a CPU that has them, like
/// `consolidate::cluster_near_duplicates`).
#[inline(always)]
pub(crate) fn dot_wide<const FUSED: bool>(a: &[f32], b: &[f32]) -> f64 {
    const W: usize = 32;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut d = [0f32; W];
    let (ca, cb) = (a.chunks_exact(W), b.chunks_exact(W));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..W {
            d[l] = if FUSED { x[l].mul_add(y[l], d[l]) } else { d[l] + x[l] * y[l] };
        }
    }
    let mut s: f64 = d.iter().map(|&v| v as f64).sum();
    for (x, y) in ra.iter().zip(rb) {
        s += (x * y) as f64;
    }
    s
}

/// `|a - b|²` over the common length: 16 lanes, `FUSED` as in [`dot_wide`].
#[inline(always)]
pub(crate) fn sq_distance_wide<const FUSED: bool>(a: &[f32], b: &[f32]) -> f32 {
    const W: usize = 16;
    let n = a.len().min(b.len());
    let mut acc = [0f32; W];
    let (ca, cb) = (a[..n].chunks_exact(W), b[..n].chunks_exact(W));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..W {
            let d = x[l] - y[l];
            acc[l] = if FUSED { d.mul_add(d, acc[l]) } else { acc[l] + d * d };
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += (x - y) * (x - y);
    }
    s
}

/// The L2 norm, summed in `f64` so large elements cannot overflow.
pub fn norm(v: &[f32]) -> f64 {
    v.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt()
}

/// Cosine similarity of a query already scaled to unit length and any stored vector.
/// A zero stored vector has similarity 0.
pub fn cosine_with_unit(unit_query: &[f32], b: &[f32]) -> f64 {
    let (d, q) = dot_and_sq_norm(unit_query, b);
    if q > 0.0 {
        (d / q.sqrt()).clamp(-1.0, 1.0)
    } else {
        0.0
    }
}

/// Cosine similarity of any two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (na, nb) = (norm(a), norm(b));
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot(a, b) / (na * nb)).clamp(-1.0, 1.0)
}

/// `v / |v|`; a zero vector comes back unchanged.
pub fn normalized(v: &[f32]) -> Vec<f32> {
    let n = norm(v);
    if n == 0.0 || !n.is_finite() {
        return v.to_vec();
    }
    v.iter().map(|&x| ((x as f64) / n) as f32).collect()
}

/// The unit query moved towards vectors: `q + mean(vᵢ / |vᵢ|)`, scaled to unit length
/// (pseudo-relevance feedback: the query and the mean of the best hits weigh the same). Zero
/// vectors are left out; with none left, `q` itself.
pub fn moved_towards<'a>(unit_query: &[f32], vectors: impl IntoIterator<Item = &'a [f32]>) -> Vec<f32> {
    let mut sum = vec![0f64; unit_query.len()];
    let mut n = 0usize;
    for v in vectors {
        let vn = norm(v);
        if v.len() != unit_query.len() || vn == 0.0 || !vn.is_finite() {
            continue;
        }
        for (s, &x) in sum.iter_mut().zip(v) {
            *s += x as f64 / vn;
        }
        n += 1;
    }
    if n == 0 {
        return unit_query.to_vec();
    }
    let moved: Vec<f32> = unit_query.iter().zip(&sum).map(|(&q, &s)| (q as f64 + s / n as f64) as f32).collect();
    normalized(&moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_towards_the_hits_is_unit_and_between() {
        let q = [1.0f32, 0.0, 0.0];
        // Towards itself: unchanged.
        let same = moved_towards(&q, [&[2.0f32, 0.0, 0.0][..]]);
        assert!((same[0] - 1.0).abs() < 1e-6 && same[1].abs() < 1e-6);
        // Halfway to one orthogonal hit: the bisector, whatever the hit's length.
        let half = moved_towards(&q, [&[0.0f32, 5.0, 0.0][..]]);
        assert!((half[0] - half[1]).abs() < 1e-6 && (norm(&half) - 1.0).abs() < 1e-6);
        // Two hits weigh as their mean; zero and wrong-length vectors are left out.
        let two = moved_towards(&q, [&[0.0f32, 1.0, 0.0][..], &[0.0, 0.0, 1.0], &[0.0, 0.0, 0.0], &[1.0, 1.0]]);
        assert!((two[1] - two[2]).abs() < 1e-6);
        assert!(two[0] > two[1], "the query weighs as much as all the hits together: {two:?}");
        assert!(cosine(&two, &[0.0, 1.0, 0.0]) > cosine(&q, &[0.0, 1.0, 0.0]));
        assert_eq!(moved_towards(&q, std::iter::empty()), q.to_vec());
    }

    fn naive_dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
    }

    #[test]
    fn dot_matches_the_naive_sum_for_every_tail_length() {
        for n in (0..40).chain([383, 384, 512, 1536]) {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            assert!((dot(&a, &b) - naive_dot(&a, &b)).abs() < 1e-4, "n={n}");
            assert!((dot_wide::<false>(&a, &b) - naive_dot(&a, &b)).abs() < 1e-4, "n={n}");
            let sq: f64 = a.iter().zip(&b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
            assert!((sq_distance_wide::<false>(&a, &b) as f64 - sq).abs() < 1e-3 * sq.max(1.0), "n={n}");
            for (d, q) in [dot_and_sq_norm(&a, &b), dot_and_sq_norm_portable(&a, &b)] {
                assert!((d - naive_dot(&a, &b)).abs() < 1e-4);
                assert!((q - naive_dot(&b, &b)).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn cosine_of_known_vectors() {
        assert!((cosine(&[1.0, 0.0], &[0.0, 1.0])).abs() < 1e-12);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-7);
        assert!((cosine(&[1.0, 0.0], &[-3.0, 0.0]) + 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        let q = normalized(&[3.0, 4.0]);
        assert!((cosine_with_unit(&q, &[6.0, 8.0]) - 1.0).abs() < 1e-7);
        assert!((cosine_with_unit(&q, &[4.0, -3.0])).abs() < 1e-7);
    }

    #[test]
    fn validation_names_the_problem() {
        assert_eq!(validate(&[]), Err(VectorProblem::Empty));
        assert_eq!(validate(&[1.0, f32::NAN]), Err(VectorProblem::NotFinite));
        assert_eq!(validate(&[f32::INFINITY]), Err(VectorProblem::NotFinite));
        assert_eq!(validate(&[0.0, 0.0]), Err(VectorProblem::Zero));
        assert_eq!(validate(&[3.0, 4.0]), Ok(5.0));
        // Huge elements do not overflow the norm.
        assert!(validate(&[3e38, 3e38]).is_ok());
    }

    #[test]
    fn normalized_has_unit_length() {
        let v = normalized(&[1.0, 2.0, 2.0]);
        assert!((norm(&v) - 1.0).abs() < 1e-6);
        assert_eq!(normalized(&[0.0, 0.0]), vec![0.0, 0.0]);
    }
}
