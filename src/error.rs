//! Every error the extension raises, in one place: a SQLSTATE, a message, and where it helps a
//! detail and a hint that tells the user what to change.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// An error on its way to the client.
#[derive(Debug, Clone)]
pub struct MemoryError {
    pub code: PgSqlErrorCode,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

pub type Result<T> = std::result::Result<T, MemoryError>;

impl MemoryError {
    pub fn new(code: PgSqlErrorCode, message: impl Into<String>) -> Self {
        MemoryError { code, message: message.into(), detail: None, hint: None }
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// 22023: a parameter has a value the function cannot use.
    pub fn invalid_parameter(message: impl Into<String>) -> Self {
        Self::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message)
    }

    /// 22004: a parameter that must be given is NULL.
    pub fn null_value(message: impl Into<String>) -> Self {
        Self::new(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, message)
    }

    /// 22000: the data does not fit together (for example vectors of different dimensions).
    /// Metadata that is not a JSON object (22023): consumers read it as one.
    pub fn metadata_not_object(value: &serde_json::Value) -> Self {
        let kind = match value {
            serde_json::Value::Null => "null",
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::Object(_) => "an object",
        };
        Self::invalid_parameter(format!("metadata must be a JSON object, not {kind}"))
            .hint("Pass an object such as '{\"topic\": \"travel\"}' ('{}' for none); wrap a list or a value in an object.")
    }

    pub fn data_exception(message: impl Into<String>) -> Self {
        Self::new(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, message)
    }

    /// XX001: a stored value is not what its type promises.
    pub fn corrupted(message: impl Into<String>) -> Self {
        Self::new(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, message)
    }

    /// XX001: a NOT NULL column of `memories` read as NULL: the installed schema is not what this
    /// library expects.
    pub fn not_null_column(column: &str) -> Self {
        Self::corrupted(format!("memories.{column} is NULL"))
            .hint("The installed schema does not match the library: run ALTER EXTENSION agent_memory UPDATE.")
    }

    /// Raises the error as an `ERROR`; the current transaction is aborted. Its texts are cut to
    /// `REPORT_BYTES` each: a message that names a value the call was given (a user, a model, a
    /// time) never echoes a megabyte of it to the client and the log.
    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.code, clipped(self.message), "agent_memory");
        if let Some(d) = self.detail {
            report = report.set_detail(clipped(d));
        }
        if let Some(h) = self.hint {
            report = report.set_hint(clipped(h));
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("an ERROR report does not return")
    }
}

/// The most bytes of each text of an error report.
pub const REPORT_BYTES: usize = 1000;

/// `text`, cut on a character's boundary to at most `REPORT_BYTES`, saying how long it was.
pub fn clipped(text: String) -> String {
    if text.len() <= REPORT_BYTES {
        return text;
    }
    let mut end = REPORT_BYTES - 40;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// `result.or_raise()`: the value, or the error raised to the client.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T> {
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => e.raise(),
        }
    }
}

/// Turns an SPI failure into an internal error that names the statement that failed.
pub fn spi(context: &'static str) -> impl Fn(pgrx::spi::SpiError) -> MemoryError {
    move |e| MemoryError::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{context}: {e}"))
}

/// The first column of the first row of an SPI result, or `None` when there is no row.
pub fn first_value<T: pgrx::FromDatum + pgrx::IntoDatum>(table: pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::SpiResult<Option<T>> {
    if table.is_empty() {
        Ok(None)
    } else {
        table.first().get_one::<T>()
    }
}
