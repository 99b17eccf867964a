//! The entry points of [`crate::private`] (re-exported as `::voqalize::__private`) whose bounds
//! users read in compile errors, and the two result kinds whose `finish` carries such a bound.
//!
//! rustc names the file that declares a bound ("required by a bound in `PlainKind::<R>::finish`
//! --> voqalize/src/tools/private.rs") and the module holding an inherent impl, so these stay in
//! this file while the rest of the macro support lives in `src/private/`: moving them would change
//! those messages (and `ui-tests/cases/*.stderr`). `voqalize::tools` re-exports them (hidden), so
//! rustc names them without the `__private` path.

use std::marker::PhantomData;

use serde_json::Value;

use super::{ToolDecl, ToolError, ToolErrorKind};
use crate::private::{ArgsDeserialize, ArgsSchema, ToolFailure, ToolInfo, ToolOutput};

/// Declares a tool whose argument is `A`.
pub fn declare<A: ArgsSchema + ?Sized>(info: ToolInfo) -> ToolDecl {
    let neutral = A::neutral_schema();
    let problem = super::schema::root_problem(&neutral);
    if let Some(problem) = &problem {
        tracing::error!(
            "tool {} ({}) is left out: its argument {} is not a struct: {problem}. A tool's \
             argument is one struct whose fields the model fills by name",
            info.name,
            info.method,
            std::any::type_name::<A>(),
        );
    }
    ToolDecl::new(info, Some(neutral), problem)
}

/// Deserialises a call's arguments into the argument struct.
///
/// # Errors
/// The arguments do not fit; the message names the bad field's path.
pub fn parse_args<A: ArgsDeserialize>(arguments: Value) -> Result<A, ToolError> {
    A::parse(arguments)
}

/// A `Result` return (what [`Probe`](crate::private::Probe) finds for `Result<T, E>`).
pub struct ResultKind<T, E>(pub(crate) PhantomData<fn() -> (T, E)>);
/// Any other return.
pub struct PlainKind<R>(pub(crate) PhantomData<fn() -> R>);

// The inherent impls are declared beside their types: rustc names an impl by the module holding
// it, and `PlainKind::<R>::finish` is what the compile errors say.
impl<T, E> ResultKind<T, E> {
    /// The result the model reads: the `Ok` value as JSON, or the `Err`'s text.
    ///
    /// # Errors
    /// The tool returned `Err`, or the value could not be serialised.
    pub fn finish(self, value: Result<T, E>) -> Result<Value, ToolError>
    where
        T: ToolOutput,
        E: ToolFailure,
    {
        match value {
            Ok(v) => v.to_json(),
            Err(e) => Err(ToolError::new(ToolErrorKind::Failed, e.text())),
        }
    }
}

impl<R> PlainKind<R> {
    /// The result the model reads: the value as JSON.
    ///
    /// # Errors
    /// The value could not be serialised.
    pub fn finish(self, value: R) -> Result<Value, ToolError>
    where
        R: ToolOutput,
    {
        value.to_json()
    }
}
