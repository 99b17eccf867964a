//! `#[derive(Stages)]`: a call's workflow stages on a fieldless enum, in three phases. `parse`
//! reads the enum, each variant's doc comment and `#[stage(...)]`, and the enum's
//! `#[stages(...)]`; `check` checks the stages as a graph (every `to(..)` names a stage, every
//! stage has a way out, every stage can be reached from the first); `generate` writes the
//! `Stages` impl. Every mistake is collected and reported at once, on the tokens that hold it;
//! when the enum's shape allows an impl (unit variants, no generics), the impl is still emitted
//! with what was read, so uses of the type add no second error.
//!
//! ```text
//! #[derive(Stages)]
//! #[stages(every(hang_up))]
//! enum Clinic {
//!     /// Ask for the caller's name and check it with `find_patient`.
//!     #[stage(tools(find_patient), to(Booking), mcp(crm))]
//!     Verify,
//!     /// Book the slot the caller picks.
//!     #[stage(tools(book), end)]
//!     Booking,
//! }
//! ```

mod check;
mod generate;
mod parse;
#[cfg(test)]
mod tests;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{DeriveInput, Ident};

use crate::ctxt::Ctxt;

/// A name as written in an attribute (a tool, a stage, an MCP toolset): its text, raw idents
/// unrawed, and where it is written.
#[derive(Clone)]
struct Named {
    text: String,
    span: Span,
}

/// The enum, as read.
struct StagesEnum<'a> {
    ident: &'a Ident,
    /// The enum's name as the user knows it (unrawed): what messages say.
    name: String,
    /// `#[stages(every(..))]`: tools offered in every stage.
    every: Vec<Named>,
    stages: Vec<Stage<'a>>,
    /// Whether an impl can be written for it: unit variants and no generics.
    usable: bool,
}

/// One variant: one stage.
struct Stage<'a> {
    variant: &'a Ident,
    /// The variant's name, unrawed.
    name: String,
    /// The doc comment; empty when missing (reported).
    instruction: String,
    /// `tools(..)`, without repeats.
    tools: Vec<Named>,
    /// `to(..)` as written, without repeats (checked against the variants by `check`).
    to: Vec<Named>,
    /// `mcp(..)`, without repeats.
    mcp: Vec<Named>,
    /// Where `end` is written, if it is.
    end: Option<Span>,
    /// Whether its `#[stage(...)]` had a key that is not one, or did not parse: what it says of
    /// the way out is unknown, so the graph checks leave it be.
    garbled: bool,
}

pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let ctxt = Ctxt::new();
    let generated = parse::read(&ctxt, &input).and_then(|stages| {
        let to = check::check(&ctxt, &stages);
        stages.usable.then(|| generate::stages_impl(&stages, &to))
    });
    let errors = ctxt.check().err().map(|e| e.to_compile_error());
    quote!(#errors #generated)
}
