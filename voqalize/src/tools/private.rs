//! Support for the code that `#[brain]`, `#[derive(Action)]` and `#[derive(AppEvent)]` generate,
//! reached as `::voqalize::__private`. Not a public API.
//!
//! The traits here exist for their compile errors: each carries a
//! `#[diagnostic::on_unimplemented]` message, and their blanket impls are
//! `#[diagnostic::do_not_recommend]`, so a missing `Deserialize`, `JsonSchema`, `Serialize` or
//! `Display` is reported as one sentence on the user's type.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{OnceLock, RwLock};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::schema;
use super::{ToolDecl, ToolError, ToolErrorKind};
use crate::session::Session;

/// The future `Toolbox::__run_tool` returns.
pub type ToolRun<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// What `#[brain]` knows about a tool at compile time.
#[derive(Debug, Clone, Copy)]
pub struct ToolInfo {
    /// The function name.
    pub name: &'static str,
    /// The doc comment.
    pub description: &'static str,
    /// `#[needs_result_now]`.
    pub needs_result_now: bool,
    /// `Type::method`.
    pub method: &'static str,
    /// Position in the impl block (the dispatcher's key).
    pub index: usize,
}

/// The tool table of brain type `B`, built once per type (generic brains included) and kept.
pub fn tool_table<B: 'static>(build: fn() -> Vec<ToolDecl>) -> &'static [ToolDecl] {
    static TABLES: OnceLock<RwLock<HashMap<TypeId, &'static [ToolDecl]>>> = OnceLock::new();
    let tables = TABLES.get_or_init(Default::default);
    let key = TypeId::of::<B>();
    if let Some(table) = tables.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return table;
    }
    // Built outside the lock: building runs user code (JsonSchema impls).
    let built = build();
    let mut tables = tables.write().unwrap_or_else(|p| p.into_inner());
    tables
        .entry(key)
        .or_insert_with(|| Box::leak(built.into_boxed_slice()))
}

/// Declares a tool whose argument is `A`.
pub fn declare<A: ArgsSchema + ?Sized>(info: ToolInfo) -> ToolDecl {
    let neutral = A::neutral_schema();
    let problem = schema::root_problem(&neutral);
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

/// Declares a tool without an argument.
pub fn declare_without_args(info: ToolInfo) -> ToolDecl {
    ToolDecl::new(info, None, None)
}

/// Deserialises a call's arguments into the argument struct.
///
/// # Errors
/// The arguments do not fit; the message names the bad field's path.
pub fn parse_args<A: ArgsDeserialize>(arguments: Value) -> Result<A, ToolError> {
    A::parse(arguments)
}

/// The dispatcher's answer to an index it does not know (never reached through `call_tool`).
pub fn unknown_index<'a>(index: usize) -> ToolRun<'a> {
    Box::pin(std::future::ready(Err(ToolError::new(
        ToolErrorKind::Unknown,
        format!("there is no tool number {index}"),
    ))))
}

/// The session serving the running brain code; `self.session()` in a `#[brain]` type.
///
/// # Panics
/// Outside a session task (a task the brain spawned itself, a plain test): clone the session into
/// such tasks instead.
#[track_caller]
pub fn current_session() -> Session {
    match Session::current() {
        Some(session) => session,
        None => panic!(
            "self.session() was called outside a session: it works in tools and brain callbacks, \
             not in tasks the brain spawned itself (clone the Session into those)"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments.

/// The parameter schema of a tool's argument type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's argument: it does not implement `JsonSchema`",
    label = "the tool's parameter schema is generated from this type",
    note = "put `#[json_type]` on the type (or derive `schemars::JsonSchema`, schemars 1.x)"
)]
pub trait ArgsSchema {
    /// The neutral schema.
    fn neutral_schema() -> Value;
}

#[diagnostic::do_not_recommend]
impl<T: JsonSchema + ?Sized> ArgsSchema for T {
    fn neutral_schema() -> Value {
        schema::neutral_schema::<T>()
    }
}

/// Deserialising a tool's argument type from the call's JSON.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's argument: it does not implement `Deserialize`",
    label = "the model's JSON arguments are deserialised into this type",
    note = "put `#[json_type]` on the type (or derive `serde::Deserialize`); the argument owns its \
            data, so it is not a reference"
)]
pub trait ArgsDeserialize: Sized {
    /// Parses the arguments.
    ///
    /// # Errors
    /// They do not fit; the message names the field's path.
    fn parse(arguments: Value) -> Result<Self, ToolError>;
}

#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned> ArgsDeserialize for T {
    fn parse(arguments: Value) -> Result<Self, ToolError> {
        serde_path_to_error::deserialize(arguments).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let message = if path == "." {
                format!("invalid arguments: {inner}")
            } else {
                format!("invalid arguments at `{path}`: {inner}")
            };
            ToolError::new(ToolErrorKind::InvalidArguments, message)
        })
    }
}

// A session parameter is reported by the `ArgKind` check alone: these impls keep the argument
// traits quiet about it.
#[diagnostic::do_not_recommend]
impl ArgsSchema for Session {
    fn neutral_schema() -> Value {
        schema::empty_parameters()
    }
}
#[diagnostic::do_not_recommend]
impl ArgsDeserialize for Session {
    fn parse(_: Value) -> Result<Self, ToolError> {
        Err(session_parameter())
    }
}
#[diagnostic::do_not_recommend]
impl ArgsSchema for &Session {
    fn neutral_schema() -> Value {
        schema::empty_parameters()
    }
}
#[diagnostic::do_not_recommend]
impl ArgsDeserialize for &Session {
    fn parse(_: Value) -> Result<Self, ToolError> {
        Err(session_parameter())
    }
}

fn session_parameter() -> ToolError {
    ToolError::new(
        ToolErrorKind::InvalidArguments,
        "a tool never takes the session",
    )
}

/// What kind of type a tool's argument is, found by type (aliases included), not by its spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// Anything else: a struct, as it should be (checked again at run time on its schema).
    Struct,
    /// `String`, `str`, a number, `bool`, `char`, `()`.
    Scalar,
    /// `Vec`, a set, a map, an array, a slice, a tuple.
    Collection,
    /// `Option<T>`.
    Optional,
    /// `serde_json::Value` or `Map`.
    AnyJson,
    /// The session handle.
    Session,
    /// An enum (`#[json_type]` saw it): serde reads it as a string or a choice of shapes.
    Enum,
    /// A unit struct (`#[json_type]` saw it): serde reads it as `null`.
    UnitStruct,
    /// A tuple struct of several fields (`#[json_type]` saw it): serde reads it as an array.
    TupleStruct,
    /// A newtype or `#[serde(transparent)]` struct (`#[json_type]` saw it) around a value that is
    /// not a struct: serde reads it as that value.
    Newtype,
}

impl ArgKind {
    /// The kind of a type that serde reads as its one field of kind `inner` (a newtype or a
    /// transparent struct).
    pub const fn wrapping(inner: ArgKind) -> ArgKind {
        match inner {
            ArgKind::Struct => ArgKind::Struct,
            _ => ArgKind::Newtype,
        }
    }

    /// The kind found by type (`probe`, for the std types voqalize lists) or, when that says
    /// nothing, by the type's own `#[json_type]` shape (`own`).
    pub const fn either(probe: ArgKind, own: ArgKind) -> ArgKind {
        match probe {
            ArgKind::Struct => own,
            other => other,
        }
    }
}

/// The fallback of the `__VOQALIZE_ARG_KIND` constant that `#[json_type]` defines on a type: a
/// type without it (derived by hand, or generic) counts as a struct, checked again at run time
/// on its schema.
pub trait ArgShapeFallback {
    /// Every type `#[json_type]` did not describe is a struct.
    const __VOQALIZE_ARG_KIND: ArgKind = ArgKind::Struct;
}

impl<T: ?Sized> ArgShapeFallback for T {}

/// `ArgProbe::<T>::KIND`: an inherent constant for the rejected types, the fallback trait's
/// constant (`Struct`) for every other type.
pub struct ArgProbe<T: ?Sized>(PhantomData<T>);

/// The fallback of [`ArgProbe`].
pub trait ArgProbeFallback {
    /// Every type not listed is a struct.
    const KIND: ArgKind = ArgKind::Struct;
}

impl<T: ?Sized> ArgProbeFallback for ArgProbe<T> {}

macro_rules! arg_kind {
    ($kind:ident: $($t:ty),* $(,)?) => {
        $(impl ArgProbe<$t> {
            /// Rejected as a tool argument.
            pub const KIND: ArgKind = ArgKind::$kind;
        })*
    };
}

arg_kind!(Scalar: String, str, bool, char, (), i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64);
arg_kind!(AnyJson: Value, serde_json::Map<String, Value>);
arg_kind!(Session: Session);

macro_rules! arg_kind_generic {
    ($kind:ident: $(<$($g:ident),*> $t:ty),* $(,)?) => {
        $(impl<$($g),*> ArgProbe<$t> {
            /// Rejected as a tool argument.
            pub const KIND: ArgKind = ArgKind::$kind;
        })*
    };
}

arg_kind_generic!(Collection:
    <T> Vec<T>,
    <T> std::collections::VecDeque<T>,
    <T> std::collections::LinkedList<T>,
    <T> std::collections::BTreeSet<T>,
    <T, S> std::collections::HashSet<T, S>,
    <K, V> std::collections::BTreeMap<K, V>,
    <K, V, S> std::collections::HashMap<K, V, S>,
    <A> (A,),
    <A, B> (A, B),
    <A, B, C> (A, B, C),
    <A, B, C, D> (A, B, C, D),
);
arg_kind_generic!(Optional: <T> Option<T>);

arg_kind!(Scalar:
    Box<str>,
    std::rc::Rc<str>,
    std::sync::Arc<str>,
    std::borrow::Cow<'static, str>,
    std::path::PathBuf,
    std::path::Path,
    std::ffi::OsString,
    std::ffi::OsStr,
    std::net::IpAddr,
    std::net::Ipv4Addr,
    std::net::Ipv6Addr,
    std::net::SocketAddr,
    std::num::NonZeroU8,
    std::num::NonZeroU16,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::num::NonZeroU128,
    std::num::NonZeroUsize,
    std::num::NonZeroI8,
    std::num::NonZeroI16,
    std::num::NonZeroI32,
    std::num::NonZeroI64,
    std::num::NonZeroI128,
    std::num::NonZeroIsize,
);
arg_kind_generic!(Collection:
    <T> Box<[T]>,
    <T> std::rc::Rc<[T]>,
    <T> std::sync::Arc<[T]>,
    <T> std::collections::BinaryHeap<T>,
);

impl<T> ArgProbe<[T]> {
    /// Rejected as a tool argument.
    pub const KIND: ArgKind = ArgKind::Collection;
}
impl<T, const N: usize> ArgProbe<[T; N]> {
    /// Rejected as a tool argument.
    pub const KIND: ArgKind = ArgKind::Collection;
}
impl ArgProbe<&str> {
    /// Rejected as a tool argument.
    pub const KIND: ArgKind = ArgKind::Scalar;
}
impl ArgProbe<&Session> {
    /// Rejected as a tool argument.
    pub const KIND: ArgKind = ArgKind::Session;
}
impl ArgProbe<&mut Session> {
    /// Rejected as a tool argument.
    pub const KIND: ArgKind = ArgKind::Session;
}

// ---------------------------------------------------------------------------------------------
// Results.

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

/// A `Result` return.
pub struct ResultKind<T, E>(PhantomData<fn() -> (T, E)>);
/// Any other return.
pub struct PlainKind<R>(PhantomData<fn() -> R>);

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

// ---------------------------------------------------------------------------------------------
// Actions and app events.

/// The payload schema of an action, for `voqalize types`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `JsonSchema`, which `#[derive(Action)]` needs",
    label = "`voqalize types` describes the action's payload to the app from its JSON Schema",
    note = "put `#[json_type]` on the type (or derive `schemars::JsonSchema`, schemars 1.x)"
)]
pub trait ActionSchema {
    /// Adds the payload.
    fn add_to(out: &mut crate::typescript::PayloadCollector<'_>, name: &'static str);
}

#[diagnostic::do_not_recommend]
impl<T: JsonSchema> ActionSchema for T {
    fn add_to(out: &mut crate::typescript::PayloadCollector<'_>, name: &'static str) {
        out.add::<T>(name);
    }
}

/// Adds an action's payload (used by `#[derive(Action)]`).
pub fn action_payload<A: ActionSchema>(
    out: &mut crate::typescript::PayloadCollector<'_>,
    name: &'static str,
) {
    A::add_to(out, name);
}

/// Adds an app event's payload (its generated payload struct).
pub fn event_payload_schema<P: JsonSchema>(
    out: &mut crate::typescript::PayloadCollector<'_>,
    name: &'static str,
) {
    out.add::<P>(name);
}

/// Deserialises an app event's payload; the error names the bad field's path.
///
/// # Errors
/// The payload does not fit (a missing field, a field the event does not declare...).
pub fn event_payload<P: DeserializeOwned>(payload: Value) -> Result<P, serde_json::Error> {
    serde_path_to_error::deserialize(payload).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            inner
        } else {
            <serde_json::Error as serde::de::Error>::custom(format!("at `{path}`: {inner}"))
        }
    })
}

/// The error for an event name the type does not answer to.
pub fn unknown_event(type_name: &str, name: &str) -> serde_json::Error {
    <serde_json::Error as serde::de::Error>::custom(format!(
        "{type_name} has no event named {name}"
    ))
}
