//! A `json` argument read as its text, so serde parses it once, without PostgreSQL converting
//! every number to `numeric` first (as `jsonb` input does).

#![allow(unsafe_code)]

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::{impl_sql_translatable, pg_sys, FromDatum};

/// The text of a `json` value.
pub struct JsonText(pub String);

impl FromDatum for JsonText {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, typoid: pg_sys::Oid) -> Option<Self> {
        // SAFETY: `json` is stored as text, so its datum reads as a `text` datum.
        unsafe { String::from_polymorphic_datum(datum, is_null, typoid) }.map(JsonText)
    }
}

// SAFETY: unboxed through `FromDatum`, as pgrx does for `String`.
unsafe impl<'fcx> ArgAbi<'fcx> for JsonText {
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

impl_sql_translatable!(JsonText, "json");

/// The text of a `jsonb` value, as `jsonb_out` writes it, so serde parses it with this crate's own
/// error handling (a nesting deeper than serde's limit is a clear error, not a panic).
pub struct JsonbText(pub String);

impl FromDatum for JsonbText {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        let (mut output, mut varlena) = (pg_sys::Oid::INVALID, false);
        // SAFETY: JSONBOID is a built-in type; getTypeOutputInfo fills both out-parameters and
        // the output function returns a palloc'd NUL-terminated string for a valid jsonb datum.
        let text = unsafe {
            pg_sys::getTypeOutputInfo(pg_sys::JSONBOID, &mut output, &mut varlena);
            let cstr = pg_sys::OidOutputFunctionCall(output, datum);
            let text = std::ffi::CStr::from_ptr(cstr).to_string_lossy().into_owned();
            pg_sys::pfree(cstr.cast());
            text
        };
        Some(JsonbText(text))
    }
}

// SAFETY: unboxed through `FromDatum`, as pgrx does for `String`.
unsafe impl<'fcx> ArgAbi<'fcx> for JsonbText {
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

impl_sql_translatable!(JsonbText, "jsonb");
