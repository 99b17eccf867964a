//! A tool's result as the JSON the model reads: any `Serialize` value, or `Result<T, E>` with an
//! error the model reads as text. The choice is made on the return type ([`Probe`]); the two
//! kinds it finds, `ResultKind` and `PlainKind`, are in `tools/private.rs`.

use std::fmt::Display;
use std::marker::PhantomData;

use serde::Serialize;
use serde_json::Value;

use crate::tools::private::{PlainKind, ResultKind};
use crate::tools::{ToolError, ToolErrorKind};

/// A value a tool may return.
#[diagnostic::on_unimplemented(
    message = "a tool cannot return `{Self}`: it does not implement `Serialize`",
    label = "the model reads a tool's result as JSON",
    note = "put `#[json_type]` on the type (or derive `serde::Serialize`), or return \
            `Result<T, E>` with `T: Serialize` and `E: Display`"
)]
pub trait ToolOutput {
    /// The result as JSON.
    ///
    /// # Errors
    /// The `Serialize` impl failed.
    fn to_json(&self) -> Result<Value, ToolError>;
}

#[diagnostic::do_not_recommend]
impl<T: Serialize + ?Sized> ToolOutput for T {
    fn to_json(&self) -> Result<Value, ToolError> {
        serde_json::to_value(self).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Failed,
                format!("the tool's result could not be serialised: {e}"),
            )
        })
    }
}

/// The error type of a tool returning `Result`.
#[diagnostic::on_unimplemented(
    message = "a tool cannot fail with `{Self}`: it does not implement `Display`",
    label = "the model reads the error's text",
    note = "implement `std::fmt::Display` for it (thiserror's `#[error(\"...\")]` does), or map \
            the error to a `String`"
)]
pub trait ToolFailure {
    /// The text the model reads.
    fn text(&self) -> String;
}

#[diagnostic::do_not_recommend]
impl<E: Display + ?Sized> ToolFailure for E {
    fn text(&self) -> String {
        self.to_string()
    }
}

/// Looks at a tool's return type: `Result<T, E>` or anything else (autoref specialisation; the
/// choice is made on the type, so aliases of `Result` count as `Result`).
pub struct Probe<R>(PhantomData<fn() -> R>);

impl<R> Probe<R> {
    /// The probe for `value`'s type.
    pub fn of(value: &R) -> Self {
        let _ = value;
        Probe(PhantomData)
    }
}

/// Chosen without autoref: only for `Result`.
pub trait ViaResult {
    /// The kind.
    type Kind;
    /// The kind.
    fn kind(&self) -> Self::Kind;
}

impl<T, E> ViaResult for Probe<Result<T, E>> {
    type Kind = ResultKind<T, E>;
    fn kind(&self) -> Self::Kind {
        ResultKind(PhantomData)
    }
}

/// Chosen with autoref: everything else.
pub trait ViaPlain {
    /// The kind.
    type Kind;
    /// The kind.
    fn kind(&self) -> Self::Kind;
}

impl<R> ViaPlain for &Probe<R> {
    type Kind = PlainKind<R>;
    fn kind(&self) -> Self::Kind {
        PlainKind(PhantomData)
    }
}
