//! A tool's argument: the traits that turn it into a schema and parse it (each with its compile
//! error), and the compile-time check of what kind of type it is ([`ArgKind`], [`ArgProbe`]).

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::session::Session;
use crate::tools::schema;
use crate::tools::{ToolError, ToolErrorKind};

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
