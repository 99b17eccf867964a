//! A tool's argument: the traits that turn it into a schema and parse it (each with its compile
//! error), and the compile-time check of what kind of type it is ([`ArgKind`], [`ArgProbe`]) and
//! of the one mistake it makes ([`verdict`], [`Arg`], the check traits).

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::session::Session;
use crate::tools::schema;
use crate::tools::shortened;
use crate::tools::{ToolDecl, ToolError, ToolErrorKind, ToolInfo};

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
            // Both come from the model: a path through its keys, and serde's words, which repeat
            // a wrong value whole (`invalid type: string "..."`). The model reads them cut.
            let path = shortened(&e.path().to_string());
            let inner = shortened(&e.into_inner().to_string());
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

/// What the compile-time check of a tool's argument finds: [`ArgVerdict::Struct`] passes, every
/// other verdict is the one error the check reports (see [`verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ArgVerdict {
    /// A struct that implements both `Deserialize` and `JsonSchema`.
    Struct,
    /// See [`ArgKind::Scalar`].
    Scalar,
    /// See [`ArgKind::Collection`].
    Collection,
    /// See [`ArgKind::Optional`].
    Optional,
    /// See [`ArgKind::AnyJson`].
    AnyJson,
    /// See [`ArgKind::Session`].
    Session,
    /// See [`ArgKind::Enum`].
    Enum,
    /// See [`ArgKind::UnitStruct`].
    UnitStruct,
    /// See [`ArgKind::TupleStruct`].
    TupleStruct,
    /// See [`ArgKind::Newtype`].
    Newtype,
    /// Neither `Deserialize` nor `JsonSchema`: `#[json_type]` is missing.
    NotJsonType,
    /// `JsonSchema` without `Deserialize`.
    NoDeserialize,
    /// `Deserialize` without `JsonSchema`.
    NoJsonSchema,
}

/// The one verdict on an argument of kind `kind` that implements [`ArgsSchema`] (`schema`) and
/// [`ArgsDeserialize`] (`deserialize`): its kind first (a `Vec<T>` is a collection whatever `T`
/// is), then the traits, so one mistake is one error.
pub const fn verdict(kind: ArgKind, schema: bool, deserialize: bool) -> u8 {
    let verdict = match kind {
        ArgKind::Scalar => ArgVerdict::Scalar,
        ArgKind::Collection => ArgVerdict::Collection,
        ArgKind::Optional => ArgVerdict::Optional,
        ArgKind::AnyJson => ArgVerdict::AnyJson,
        ArgKind::Session => ArgVerdict::Session,
        ArgKind::Enum => ArgVerdict::Enum,
        ArgKind::UnitStruct => ArgVerdict::UnitStruct,
        ArgKind::TupleStruct => ArgVerdict::TupleStruct,
        ArgKind::Newtype => ArgVerdict::Newtype,
        ArgKind::Struct => match (schema, deserialize) {
            (true, true) => ArgVerdict::Struct,
            (false, false) => ArgVerdict::NotJsonType,
            (true, false) => ArgVerdict::NoDeserialize,
            (false, true) => ArgVerdict::NoJsonSchema,
        },
    };
    verdict as u8
}

/// `Arg::<T>`: whether `T` implements the argument traits, as constants (`SCHEMA`,
/// `DESERIALIZE`), and the declaration and parsing of an argument whose check passed. The inherent
/// items hold when `T` implements the trait; otherwise [`ArgFallback`]'s stand in, so the check
/// alone reports the mistake (and the build fails: the fallbacks never run).
pub struct Arg<T: ?Sized>(PhantomData<T>);

impl<T: ArgsSchema + ?Sized> Arg<T> {
    /// `T` implements [`ArgsSchema`].
    pub const SCHEMA: bool = true;

    /// [`declare`](crate::private::declare).
    pub fn declare(info: ToolInfo) -> ToolDecl {
        crate::private::declare::<T>(info)
    }
}

impl<T: ArgsDeserialize> Arg<T> {
    /// `T` implements [`ArgsDeserialize`].
    pub const DESERIALIZE: bool = true;

    /// [`parse_args`](crate::private::parse_args).
    ///
    /// # Errors
    /// The arguments do not fit; the message names the bad field's path.
    pub fn parse(arguments: Value) -> Result<T, ToolError> {
        crate::private::parse_args::<T>(arguments)
    }
}

/// The fallback of [`Arg`], for a type whose check fails the build.
pub trait ArgFallback<T: ?Sized> {
    /// `T` does not implement [`ArgsSchema`].
    const SCHEMA: bool = false;
    /// `T` does not implement [`ArgsDeserialize`].
    const DESERIALIZE: bool = false;

    /// Never runs: the argument check failed the build.
    fn declare(info: ToolInfo) -> ToolDecl {
        unreachable!("tool {}: its argument check failed the build", info.name)
    }

    /// Never runs: the argument check failed the build.
    ///
    /// # Errors
    /// Never.
    fn parse(_: Value) -> Result<T, ToolError>
    where
        T: Sized,
    {
        unreachable!("a tool's argument check failed the build")
    }
}

impl<T: ?Sized> ArgFallback<T> for Arg<T> {}

/// The checks behind [`ArgVerdict`]: `<A as NotAScalar<{ verdict != Scalar }>>::OK` and so on,
/// one trait per verdict, each implemented for `true` only. Their messages are the errors a user
/// reads; the traits are re-exported (hidden) by `voqalize::tools`, so rustc names them without a
/// path.
macro_rules! arg_checks {
    ($($(#[$meta:meta])* $name:ident;)*) => {
        $(
            $(#[$meta])*
            pub trait $name<const OK: bool> {
                /// Named by the check, so the bound is proven.
                const OK: () = ();
            }
            #[diagnostic::do_not_recommend]
            impl<A: ?Sized> $name<true> for A {}
        )*
    };
}

arg_checks! {
    /// A scalar argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is a scalar, but a tool's argument is \
                   one struct whose fields the model fills by name",
        label = "a scalar",
        note = "put the value in a struct: `#[json_type] struct Args {{ value: {Self} }}`"
    )]
    NotAScalar;
    /// A collection argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is a collection, but a tool's \
                   argument is one struct whose fields the model fills by name",
        label = "a collection",
        note = "put it in a struct: `#[json_type] struct Args {{ items: {Self} }}`"
    )]
    NotACollection;
    /// An `Option` argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is an `Option`, but a tool's argument \
                   is one struct",
        label = "an `Option`",
        note = "take the struct itself and make its fields `Option`s (the model may leave those \
                out)"
    )]
    NotAnOption;
    /// A JSON value argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is any JSON value, but a tool's \
                   argument is one struct with a schema the model can follow",
        label = "any JSON value",
        note = "declare the fields in a `#[json_type]` struct"
    )]
    NotAnyJson;
    /// The session as an argument.
    #[diagnostic::on_unimplemented(
        message = "a tool never takes the session as a parameter",
        label = "the session",
        note = "remove the parameter and call `self.session()` inside the tool"
    )]
    NotTheSession;
    /// An enum argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is an enum (serde reads it as a string \
                   or a choice of shapes), but a tool's argument is one struct whose fields the \
                   model fills by name",
        label = "an enum",
        note = "a schema that is not an object would be left out of every turn: give it named \
                fields, or wrap it: `#[json_type] struct Args {{ value: {Self} }}`"
    )]
    NotAnEnum;
    /// A unit struct argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is a unit struct (serde reads it as \
                   `null`), but a tool's argument is one struct whose fields the model fills by \
                   name",
        label = "a unit struct",
        note = "a schema that is not an object would be left out of every turn: give it named \
                fields, or wrap it: `#[json_type] struct Args {{ value: {Self} }}`"
    )]
    NotAUnitStruct;
    /// A tuple struct argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is a tuple struct (serde reads it as \
                   an array), but a tool's argument is one struct whose fields the model fills by \
                   name",
        label = "a tuple struct",
        note = "a schema that is not an object would be left out of every turn: give it named \
                fields, or wrap it: `#[json_type] struct Args {{ value: {Self} }}`"
    )]
    NotATupleStruct;
    /// A newtype argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it is a struct around one value that is \
                   not a struct (serde reads a newtype or `#[serde(transparent)]` struct as its \
                   field), but a tool's argument is one struct whose fields the model fills by \
                   name",
        label = "read as the value it wraps",
        note = "a schema that is not an object would be left out of every turn: give it named \
                fields, or wrap it: `#[json_type] struct Args {{ value: {Self} }}`"
    )]
    NotANewtype;
    /// An argument type without `#[json_type]`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it implements neither `Deserialize` nor \
                   `JsonSchema`",
        label = "the model's JSON arguments are deserialised into this type, and the tool's \
                 parameter schema is generated from it",
        note = "put `#[json_type]` on the type (or derive `serde::Deserialize` and \
                `schemars::JsonSchema`, schemars 1.x)"
    )]
    JsonType;
    /// An argument type without `Deserialize`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it does not implement `Deserialize`",
        label = "the model's JSON arguments are deserialised into this type",
        note = "put `#[json_type]` on the type (or derive `serde::Deserialize`); the argument owns \
                its data, so it is not a reference"
    )]
    Deserializable;
    /// An argument type without `JsonSchema`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a tool's argument: it does not implement `JsonSchema`",
        label = "the tool's parameter schema is generated from this type",
        note = "put `#[json_type]` on the type (or derive `schemars::JsonSchema`, schemars 1.x)"
    )]
    WithJsonSchema;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoTraits;

    #[test]
    fn the_verdict_is_the_kind_first_then_the_traits() {
        let v = |kind, schema, de| verdict(kind, schema, de);
        assert_eq!(v(ArgKind::Struct, true, true), ArgVerdict::Struct as u8);
        assert_eq!(
            v(ArgKind::Struct, false, false),
            ArgVerdict::NotJsonType as u8
        );
        assert_eq!(
            v(ArgKind::Struct, true, false),
            ArgVerdict::NoDeserialize as u8
        );
        assert_eq!(
            v(ArgKind::Struct, false, true),
            ArgVerdict::NoJsonSchema as u8
        );
        // `Vec<NoTraits>` is a collection, whatever its items implement.
        assert_eq!(
            v(ArgKind::Collection, false, false),
            ArgVerdict::Collection as u8
        );
        assert_eq!(v(ArgKind::Session, true, true), ArgVerdict::Session as u8);
    }

    #[test]
    fn arg_finds_the_traits_by_type() {
        #[allow(unused_imports)]
        use super::ArgFallback as _;
        const {
            assert!(Arg::<u32>::SCHEMA && Arg::<u32>::DESERIALIZE);
            assert!(!Arg::<NoTraits>::SCHEMA && !Arg::<NoTraits>::DESERIALIZE);
            assert!(Arg::<str>::SCHEMA && !Arg::<str>::DESERIALIZE);
            assert!(Arg::<Session>::SCHEMA && Arg::<Session>::DESERIALIZE);
        }
    }
}
