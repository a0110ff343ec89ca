//! pgvector's `vector` and `halfvec` datums, read in place.
//!
//! One of the modules where `unsafe` is allowed (see `src/pg.rs`). pgvector lays both types out
//! as a varlena:
//!
//! ```text
//! int32 vl_len_   (varlena header)
//! int16 dim       (number of elements)
//! int16 unused    (always 0)
//! float4 x[dim]   (vector)   |   half x[dim] (halfvec, IEEE binary16)
//! ```
//!
//! [`VectorDatum`] detoasts a datum, checks that its size matches its `dim`, lends the elements
//! as a slice, and frees the detoasted copy on `Drop`. [`Vector`] and [`HalfVec`] wrap it as
//! function arguments mapped to the SQL types `vector` and `halfvec`; the generated SQL names the
//! types unqualified, and `CREATE EXTENSION` resolves them in pgvector's own schema, wherever it is.

#![allow(unsafe_code)]

use half::f16;
use pgrx::callconv::{Arg, ArgAbi};
use pgrx::pg_sys;
use pgrx::{impl_sql_translatable, FromDatum};

use crate::error::MemoryError;

/// Bytes before the first element: the varlena header, `dim` and `unused`.
const HEADER: usize = 8;
/// pgvector's limit on the number of elements of either type.
pub const MAX_DIM: usize = 16_000;

/// The element type of a vector datum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    /// `vector`: 4-byte floats.
    F32,
    /// `halfvec`: 2-byte floats.
    F16,
}

impl Element {
    fn size(self) -> usize {
        match self {
            Element::F32 => 4,
            Element::F16 => 2,
        }
    }

    pub fn type_name(self) -> &'static str {
        match self {
            Element::F32 => "vector",
            Element::F16 => "halfvec",
        }
    }
}

/// A detoasted `vector` or `halfvec` datum, valid for the current memory context.
pub struct VectorDatum {
    /// Start of the detoasted varlena (4-byte header).
    ptr: *mut pg_sys::varlena,
    /// Whether `ptr` is a copy made by detoasting, to be freed on drop.
    owned: bool,
    element: Element,
    dim: usize,
}

impl VectorDatum {
    /// Reads a datum of the given element type.
    ///
    /// # Safety
    /// `datum` must be a non-null datum of pgvector's `vector` (for [`Element::F32`]) or `halfvec`
    /// (for [`Element::F16`]) type, valid for the current memory context.
    pub unsafe fn from_datum(datum: pg_sys::Datum, element: Element) -> crate::error::Result<Self> {
        let raw = datum.cast_mut_ptr::<pg_sys::varlena>();
        if raw.is_null() {
            return Err(MemoryError::corrupted(format!("a {} datum is a null pointer", element.type_name())));
        }
        // SAFETY: `raw` points to a varlena of this type (the caller's promise); detoasting returns
        // either the same pointer (plain 4-byte header, in line) or a fresh palloc'd copy.
        let ptr = unsafe { pg_sys::pg_detoast_datum(raw) };
        let owned = ptr != raw;
        // SAFETY: a detoasted varlena has a 4-byte header, so its total size is readable, and
        // pgvector's values are at least HEADER bytes long; the size is checked before `dim` is used.
        let total = unsafe { varsize_4b(ptr) };
        let this_dim = if total >= HEADER {
            // SAFETY: at least HEADER bytes are present; `dim` is the int16 after the header.
            unsafe { (ptr as *const u8).add(4).cast::<i16>().read_unaligned() }
        } else {
            -1
        };
        let mut v = VectorDatum { ptr, owned, element, dim: 0 };
        if this_dim < 0 || total != HEADER + this_dim as usize * element.size() {
            return Err(MemoryError::corrupted(format!(
                "a {} datum of {total} bytes does not hold {this_dim} elements",
                element.type_name()
            )));
        }
        v.dim = this_dim as usize;
        if v.dim > MAX_DIM {
            return Err(MemoryError::corrupted(format!("a {} datum has {} dimensions", element.type_name(), v.dim)));
        }
        Ok(v)
    }

    pub fn element(&self) -> Element {
        self.element
    }

    pub fn dims(&self) -> usize {
        self.dim
    }

    fn data(&self) -> *const u8 {
        // SAFETY: the size check in `from_datum` guarantees HEADER bytes precede the elements.
        unsafe { (self.ptr as *const u8).add(HEADER) }
    }

    /// The elements of a `vector`, borrowed in place when aligned (as PostgreSQL stores them);
    /// `None` for a `halfvec` or an unaligned copy.
    pub fn as_f32(&self) -> Option<&[f32]> {
        let p = self.data();
        if self.element != Element::F32 || p.align_offset(std::mem::align_of::<f32>()) != 0 {
            return None;
        }
        // SAFETY: `from_datum` checked that `dim` f32s follow the header; `p` is aligned; the
        // memory lives as long as `self` (freed only in `Drop`).
        Some(unsafe { std::slice::from_raw_parts(p.cast::<f32>(), self.dim) })
    }

    /// The elements of a `halfvec`, borrowed in place when aligned; `None` otherwise.
    pub fn as_f16(&self) -> Option<&[f16]> {
        let p = self.data();
        if self.element != Element::F16 || p.align_offset(std::mem::align_of::<f16>()) != 0 {
            return None;
        }
        // SAFETY: as in `as_f32`, with 2-byte elements (`half::f16` is `repr(transparent)` over u16).
        Some(unsafe { std::slice::from_raw_parts(p.cast::<f16>(), self.dim) })
    }

    /// The elements as 4-byte floats, converting a `halfvec` and copying an unaligned datum.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        if let Some(s) = self.as_f32() {
            return s.to_vec();
        }
        if let Some(s) = self.as_f16() {
            return s.iter().map(|h| h.to_f32()).collect();
        }
        let p = self.data();
        (0..self.dim)
            .map(|i| match self.element {
                // SAFETY: index `i` is below `dim`, checked against the datum's size.
                Element::F32 => unsafe { p.add(i * 4).cast::<f32>().read_unaligned() },
                Element::F16 => {
                    // SAFETY: index `i` is below `dim`, checked against the datum's size.
                    let bits = unsafe { p.add(i * 2).cast::<u16>().read_unaligned() };
                    f16::from_bits(bits).to_f32()
                }
            })
            .collect()
    }

    /// Runs `f` on the elements as 4-byte floats, borrowing them when possible and converting into
    /// `scratch` otherwise (so a loop over many datums reuses one buffer).
    pub fn with_f32<R>(&self, scratch: &mut Vec<f32>, f: impl FnOnce(&[f32]) -> R) -> R {
        if let Some(s) = self.as_f32() {
            return f(s);
        }
        scratch.clear();
        if let Some(s) = self.as_f16() {
            scratch.extend(s.iter().map(|h| h.to_f32()));
        } else {
            scratch.extend(self.to_f32_vec());
        }
        f(scratch)
    }
}

impl Drop for VectorDatum {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `ptr` was palloc'd by `pg_detoast_datum` in the current memory context and
            // is referenced by nothing else once `self` is gone.
            unsafe { pg_sys::pfree(self.ptr.cast()) }
        }
    }
}

/// The total size of a varlena with a 4-byte header (`VARSIZE_4B`).
///
/// # Safety
/// `ptr` must point to a detoasted varlena.
unsafe fn varsize_4b(ptr: *const pg_sys::varlena) -> usize {
    // SAFETY: the caller promises a 4-byte header; its low 30 bits (little-endian layout, as
    // PostgreSQL uses on the platforms it supports) or high 30 bits (big-endian) are the size.
    let word = unsafe { ptr.cast::<u32>().read_unaligned() };
    if cfg!(target_endian = "little") {
        (word >> 2) as usize
    } else {
        (word & 0x3FFF_FFFF) as usize
    }
}

macro_rules! vector_argument {
    ($name:ident, $element:expr, $sql:literal, $doc:literal) => {
        #[doc = $doc]
        pub struct $name(pub VectorDatum);

        impl FromDatum for $name {
            unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
                if is_null {
                    return None;
                }
                // SAFETY: PostgreSQL passes a datum of the argument's declared SQL type.
                match unsafe { VectorDatum::from_datum(datum, $element) } {
                    Ok(v) => Some($name(v)),
                    Err(e) => e.raise(),
                }
            }
        }

        // SAFETY: the argument is unboxed through `FromDatum`, exactly as pgrx does for its own
        // by-reference types.
        unsafe impl<'fcx> ArgAbi<'fcx> for $name {
            unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
                let index = arg.index();
                // SAFETY: the caller (pgrx) passes this function\'s own argument.
                unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
            }

            unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> pgrx::nullable::Nullable<Self> {
                // SAFETY: the caller (pgrx) passes this function\'s own argument.
                unsafe { arg.unbox_arg_using_from_datum::<Self>() }.into()
            }
        }

        impl_sql_translatable!($name, $sql);
    };
}

vector_argument!(Vector, Element::F32, "vector", "A `vector` argument (pgvector), read in place.");
vector_argument!(HalfVec, Element::F16, "halfvec", "A `halfvec` argument (pgvector), read in place.");

/// A value that can be turned into a vector datum: a `vector` or `halfvec` argument as it is, or
/// text in pgvector's input syntax (`'[0.1, 0.2, ...]'`), parsed by pgvector's own input function.
pub trait IntoVectorDatum {
    fn into_vector_datum(self) -> crate::error::Result<VectorDatum>;
}

impl IntoVectorDatum for Vector {
    fn into_vector_datum(self) -> crate::error::Result<VectorDatum> {
        Ok(self.0)
    }
}

impl IntoVectorDatum for HalfVec {
    fn into_vector_datum(self) -> crate::error::Result<VectorDatum> {
        Ok(self.0)
    }
}

impl IntoVectorDatum for &str {
    fn into_vector_datum(self) -> crate::error::Result<VectorDatum> {
        parse_vector_text(self)
    }
}

/// The OID of pgvector's `vector` type, looked up in the schema pgvector is installed in.
pub fn vector_type_oid() -> crate::error::Result<pg_sys::Oid> {
    // A read (no transaction id), so the text forms work on a standby too.
    pgrx::spi::Spi::connect(|client| {
        let table = client
            .select(
                "SELECT t.oid FROM pg_catalog.pg_type t \
                   JOIN pg_catalog.pg_extension e ON e.extnamespace OPERATOR(pg_catalog.=) t.typnamespace \
                  WHERE e.extname OPERATOR(pg_catalog.=) 'vector' AND t.typname OPERATOR(pg_catalog.=) 'vector'",
                Some(1),
                &[],
            )
            .map_err(crate::error::spi("looking up pgvector's vector type"))?;
        crate::error::first_value::<pg_sys::Oid>(table).map_err(crate::error::spi("looking up pgvector's vector type"))
    })?
    .ok_or_else(|| {
        MemoryError::new(pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, "pgvector's type vector was not found")
            .hint("CREATE EXTENSION vector;")
    })
}

thread_local! {
    /// pgvector's `vector` type OID in this backend's database, once looked up.
    static VECTOR_OID: std::cell::Cell<Option<pg_sys::Oid>> = const { std::cell::Cell::new(None) };
}

/// Whether `oid` is pgvector's `vector` type. The type's OID is looked up once per backend (a
/// query), not once per row; a different OID is looked up again before it is refused (pgvector
/// may have been dropped and created anew).
pub fn is_vector_type(oid: pg_sys::Oid) -> crate::error::Result<bool> {
    if VECTOR_OID.get() == Some(oid) {
        return Ok(true);
    }
    let current = vector_type_oid()?;
    VECTOR_OID.set(Some(current));
    Ok(current == oid)
}

/// Parses text in pgvector's input syntax with pgvector's input function, so the text form
/// accepts exactly what `'...'::vector` accepts and fails with pgvector's own errors.
pub fn parse_vector_text(text: &str) -> crate::error::Result<VectorDatum> {
    let oid = vector_type_oid()?;
    let cstr = std::ffi::CString::new(text)
        .map_err(|_| MemoryError::invalid_parameter("a vector's text contains a NUL byte").hint("Pass text like '[0.1, 0.2, 0.3]'."))?;
    let mut input = pg_sys::Oid::INVALID;
    let mut ioparam = pg_sys::Oid::INVALID;
    // SAFETY: `oid` is a valid type OID; `getTypeInputInfo` fills both out-parameters (or raises).
    unsafe { pg_sys::getTypeInputInfo(oid, &mut input, &mut ioparam) };
    // SAFETY: `cstr` is a NUL-terminated string that outlives the call; the input function of
    // `vector` returns a palloc'd vector datum or raises an error.
    let datum = unsafe { pg_sys::OidInputFunctionCall(input, cstr.as_ptr().cast_mut(), ioparam, -1) };
    // SAFETY: the datum was just made by vector's input function.
    unsafe { VectorDatum::from_datum(datum, Element::F32) }
}

/// Checks that `n` numbers fit in a pgvector vector (at least 1, at most [`MAX_DIM`]).
pub fn check_dims(n: usize, what: &str) -> crate::error::Result<()> {
    if n == 0 {
        return Err(
            MemoryError::invalid_parameter(format!("{what} has no numbers")).hint("Pass the embedding: a non-empty list of numbers.")
        );
    }
    if n > MAX_DIM {
        return Err(MemoryError::new(
            pgrx::PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{what} has {n} numbers, more than pgvector's limit of {MAX_DIM} dimensions"),
        )
        .hint("Pass an embedding of at most 16000 dimensions; reduce it with the model's own truncation if it has one."));
    }
    Ok(())
}

/// A new `vector` datum holding `values`, palloc'd in the current memory context; an error when
/// `values` has no numbers or more than pgvector's limit, before anything is built.
pub fn new_vector_datum(values: &[f32]) -> crate::error::Result<pg_sys::Datum> {
    check_dims(values.len(), "an embedding")?;
    Ok(raw_vector_datum(values))
}

/// Builds the datum; `values.len()` is between 1 and [`MAX_DIM`] (checked by the caller).
fn raw_vector_datum(values: &[f32]) -> pg_sys::Datum {
    debug_assert!(!values.is_empty() && values.len() <= MAX_DIM);
    let size = HEADER + 4 * values.len();
    // SAFETY: palloc0 returns `size` zeroed bytes (or raises); the header is written with
    // pgrx's SET_VARSIZE equivalent, `dim` after it (`unused` stays 0), then the elements.
    unsafe {
        let p = pg_sys::palloc0(size) as *mut u8;
        pgrx::set_varsize_4b(p.cast(), size as i32);
        p.add(4).cast::<i16>().write_unaligned(values.len() as i16);
        std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), p.add(HEADER), 4 * values.len());
        pg_sys::Datum::from(p)
    }
}

/// A `vector[]` datum holding one vector per row (NULL for an empty row), for set-based writes
/// (`unnest($n)`), with the OID of pgvector's array type.
pub fn new_vector_array(rows: &[Vec<f32>]) -> crate::error::Result<pgrx::datum::DatumWithOid<'static>> {
    let elem = vector_type_oid()?;
    // SAFETY: plain catalog lookups for a valid type OID.
    let array_type = unsafe { pg_sys::get_array_type(elem) };
    if array_type == pg_sys::Oid::INVALID {
        return Err(MemoryError::corrupted("pgvector's type vector has no array type"));
    }
    let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
    // SAFETY: fills the three out-parameters for a valid type OID.
    unsafe { pg_sys::get_typlenbyvalalign(elem, &mut len, &mut byval, &mut align) };
    // An empty row is a NULL element (a memory the background worker embeds later).
    let mut nulls: Vec<bool> = rows.iter().map(|r| r.is_empty()).collect();
    let mut datums: Vec<pg_sys::Datum> = rows
        .iter()
        .map(|r| if r.is_empty() { Ok(pg_sys::Datum::from(0usize)) } else { new_vector_datum(r) })
        .collect::<crate::error::Result<_>>()?;
    let (mut dims, mut lbs) = ([datums.len() as i32], [1i32]);
    // SAFETY: `datums` and `nulls` hold `rows.len()` entries, each a valid vector datum of the
    // element type described by (len, byval, align) where its null flag is false;
    // construct_md_array copies them into a new palloc'd one-dimensional array.
    let array = unsafe {
        pg_sys::construct_md_array(
            datums.as_mut_ptr(),
            nulls.as_mut_ptr(),
            1,
            dims.as_mut_ptr(),
            lbs.as_mut_ptr(),
            elem,
            len as i32,
            byval,
            align,
        )
    };
    // SAFETY: `array` is a valid array of `array_type`.
    Ok(unsafe { pgrx::datum::DatumWithOid::new(pg_sys::Datum::from(array), array_type) })
}

/// A vector datum of `values`, to use as a query (palloc'd in the current memory context).
pub fn vector_datum_of(values: &[f32]) -> crate::error::Result<VectorDatum> {
    let datum = new_vector_datum(values)?;
    // SAFETY: a fresh `vector` datum, just built.
    unsafe { VectorDatum::from_datum(datum, Element::F32) }
}

/// A `vector` result of a SQL function, built from its values.
pub struct VectorResult(pub Vec<f32>);

impl pgrx::IntoDatum for VectorResult {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        match new_vector_datum(&self.0) {
            Ok(d) => Some(d),
            Err(e) => e.raise(),
        }
    }

    fn type_oid() -> pg_sys::Oid {
        vector_type_oid().unwrap_or_else(|e| e.raise())
    }
}

impl_sql_translatable!(VectorResult, "vector");

// SAFETY: as pgrx boxes its own by-reference results: the datum is returned to the function's
// caller, or NULL when there is none.
unsafe impl pgrx::callconv::BoxRet for VectorResult {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut pgrx::callconv::FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        match pgrx::IntoDatum::into_datum(self) {
            // SAFETY: a datum of the function's declared result type.
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

/// Calls `f` with each non-NULL `vector` of a `vector[]` datum, in order.
///
/// # Safety
/// `datum` must be a non-null datum of an array of pgvector's `vector`, valid for the current
/// memory context.
pub unsafe fn for_each_in_array(
    datum: pg_sys::Datum,
    mut f: impl FnMut(VectorDatum) -> crate::error::Result<()>,
) -> crate::error::Result<()> {
    let raw = datum.cast_mut_ptr::<pg_sys::varlena>();
    if raw.is_null() {
        return Err(MemoryError::corrupted("a vector[] datum is a null pointer"));
    }
    // SAFETY: the caller's promise: an array datum; detoasting returns it or a palloc'd copy, and
    // deconstruct_array reads an array of the element type it names, returning palloc'd arrays
    // of `n` datums (pointing into the array) and null flags.
    unsafe {
        let array = pg_sys::pg_detoast_datum(raw).cast::<pg_sys::ArrayType>();
        let elem = (*array).elemtype;
        let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
        pg_sys::get_typlenbyvalalign(elem, &mut len, &mut byval, &mut align);
        let (mut elems, mut nulls, mut n) = (std::ptr::null_mut::<pg_sys::Datum>(), std::ptr::null_mut::<bool>(), 0i32);
        pg_sys::deconstruct_array(array, elem, len as i32, byval, align, &mut elems, &mut nulls, &mut n);
        let mut out = Ok(());
        for i in 0..n.max(0) as usize {
            if !*nulls.add(i) {
                out = VectorDatum::from_datum(*elems.add(i), Element::F32).and_then(&mut f);
                if out.is_err() {
                    break;
                }
            }
        }
        if !elems.is_null() {
            pg_sys::pfree(elems.cast());
        }
        if !nulls.is_null() {
            pg_sys::pfree(nulls.cast());
        }
        if array.cast::<pg_sys::varlena>() != raw {
            pg_sys::pfree(array.cast());
        }
        out
    }
}

/// A `vector[]` result of a SQL function: one vector per element.
pub struct VectorArrayResult(pub Vec<Vec<f32>>);

impl pgrx::IntoDatum for VectorArrayResult {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        match new_vector_array(&self.0) {
            Ok(d) => d.datum().map(|d| d.sans_lifetime()),
            Err(e) => e.raise(),
        }
    }

    fn type_oid() -> pg_sys::Oid {
        let elem = vector_type_oid().unwrap_or_else(|e| e.raise());
        // SAFETY: a catalog lookup for a valid type OID.
        unsafe { pg_sys::get_array_type(elem) }
    }
}

impl_sql_translatable!(VectorArrayResult, "vector[]");

// SAFETY: as for `VectorResult`: the datum is returned to the function's caller, or NULL.
unsafe impl pgrx::callconv::BoxRet for VectorArrayResult {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut pgrx::callconv::FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        match pgrx::IntoDatum::into_datum(self) {
            // SAFETY: a datum of the function's declared result type.
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

/// A `vector` parameter for a query: a fresh datum of `values`, with pgvector's type OID.
pub fn vector_param(values: &[f32]) -> crate::error::Result<pgrx::datum::DatumWithOid<'static>> {
    let oid = vector_type_oid()?;
    // SAFETY: a fresh `vector` datum, passed with pgvector's type OID.
    Ok(unsafe { pgrx::datum::DatumWithOid::new(new_vector_datum(values)?, oid) })
}

/// The `vector` in column `ordinal` of the current row of an SPI result (`None` for NULL),
/// after checking that the column is of type `vector`.
pub fn vector_column(table: &pgrx::spi::SpiTupleTable<'_>, ordinal: usize) -> crate::error::Result<Option<VectorDatum>> {
    let read = crate::error::spi("reading an embedding");
    let oid = table.column_type_oid(ordinal).map_err(&read)?;
    if !is_vector_type(oid.value())? {
        return Err(crate::error::MemoryError::corrupted(format!("column {ordinal} of the query is not a vector")));
    }
    match table.get_datum_by_ordinal(ordinal).map_err(&read)? {
        // SAFETY: a non-null datum of a column of type `vector`, valid for the current row.
        Some(d) => Ok(Some(unsafe { VectorDatum::from_datum(d, Element::F32) }?)),
        None => Ok(None),
    }
}

/// The best cosine similarity of the unit vector `q` to the vectors of a `vector[]` datum (`None`
/// for an array without vectors): a long memory's windows. A vector of another dimension than
/// `q`'s is `mismatch`'s error.
///
/// # Safety
/// As for [`for_each_in_array`].
pub unsafe fn best_in_array(
    datum: pg_sys::Datum,
    q: &[f32],
    scratch: &mut Vec<f32>,
    mismatch: impl Fn(usize) -> MemoryError,
) -> crate::error::Result<Option<f64>> {
    let mut best: Option<f64> = None;
    // SAFETY: the caller's promise.
    unsafe {
        for_each_in_array(datum, |v| {
            if v.dims() != q.len() {
                return Err(mismatch(v.dims()));
            }
            let s = v.with_f32(scratch, |x| agent_memory_core::vecmath::cosine_with_unit(q, x));
            best = Some(best.map_or(s, |b| b.max(s)));
            Ok(())
        })?;
    }
    Ok(best)
}

/// [`best_in_array`] of a `vector[]` column of an SPI result (`None` for NULL).
pub fn best_in_array_column(
    table: &pgrx::spi::SpiTupleTable<'_>,
    ordinal: usize,
    q: &[f32],
    scratch: &mut Vec<f32>,
    mismatch: impl Fn(usize) -> MemoryError,
) -> crate::error::Result<Option<f64>> {
    match table.get_datum_by_ordinal(ordinal).map_err(crate::error::spi("reading a memory's windows"))? {
        // SAFETY: a non-null datum of the query's `emb_windows` column (`vector[]`), valid for the row.
        Some(d) => unsafe { best_in_array(d, q, scratch, mismatch) },
        None => Ok(None),
    }
}

/// The text of a `text` datum (detoasted if needed; a copy only when it was toasted or is not
/// valid UTF-8).
///
/// # Safety
/// `datum` must be a non-null datum of type `text`, valid for the current memory context.
pub unsafe fn text_of<'a>(datum: pg_sys::Datum) -> std::borrow::Cow<'a, str> {
    // SAFETY: the caller's promise; a text is a varlena like a bytea.
    let bytes = unsafe { bytes_of(datum) };
    // The database's text is UTF-8: the fast check passes; anything else is made readable.
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The bytes of a varlena datum (`bytea`, `text`), detoasted if needed.
///
/// # Safety
/// `datum` must be a non-null varlena datum, valid for the current memory context; the slice is
/// valid as long as the datum is.
pub unsafe fn bytes_of<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: the caller's promise; `pg_detoast_datum_packed` returns the datum itself when it is
    // in line and uncompressed, else a palloc'd copy in the current memory context (which lives
    // until the end of the call).
    unsafe {
        let v = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        std::slice::from_raw_parts(pgrx::vardata_any(v) as *const u8, pgrx::varsize_any_exhdr(v))
    }
}
