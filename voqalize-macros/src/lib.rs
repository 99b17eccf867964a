//! Macros for voqalize. Use them through `voqalize::prelude::*`; the generated code names only
//! `::voqalize::...` paths, so a crate needs no other dependency for them.
//!
//! Set `VOQALIZE_MACROS_DEBUG=1` while building to print what `#[brain]` generates.

// One job per module, in the order a macro runs: the attribute grammar (`attr`, `serde_attr`),
// the error collector (`ctxt`), then per macro its parse, check and generate phases (`brain`,
// `derive`). `text` holds the wording helpers they share.
mod attr;
mod brain;
mod ctxt;
mod derive;
mod near;
mod serde_attr;
#[cfg(test)]
mod test_support;
mod text;
mod tool_attr;

use proc_macro::TokenStream;
use quote::quote;

/// Generates the tool table of a brain from one impl block.
///
/// **Grammar**: `#[brain]`, `#[brain(visible = method)]`, `#[brain(stages = Type)]` or both
/// options, on an inherent impl block. Inside it, methods marked `#[tool]` (or `#[tool(name =
/// "...")]`), optionally `#[needs_result_now]`, are the tools; with `stages = Type` (a
/// `#[derive(Stages)]` enum), methods marked `#[transition(to = Stage, ...)]` are the tools that
/// move the call to another stage; every other item passes through.
///
/// **Typing**: a tool is `async fn name(&self) -> R` or `async fn name(&self, args: A) -> R`,
/// with a doc comment. `A` is one owned struct implementing `Deserialize` and `JsonSchema`
/// (`#[json_type]` gives both); `R` implements `Serialize`, or is `Result<T, E>` with
/// `T: Serialize` and `E: Display`. The type is `Send + Sync + 'static` and each tool's future is
/// `Send`. `visible` names a method `fn(&self, &ToolDecl) -> bool`. `stages` names a type
/// implementing `voqalize::stages::Stages`; a transition's `to` is one of its variants, written
/// bare.
///
/// **Semantics**: the impl block is emitted unchanged (minus these attributes), followed by
/// `impl voqalize::tools::Toolbox for Type` (declarations in source order, the dispatcher) and a
/// `fn session(&self) -> voqalize::Session` on the type (unless the block defines `session`).
/// With `stages`, the `Toolbox` impl also hands the voice core the stage table, and constants
/// check at compile time that every tool a stage names is declared (the error is on `Type`), that
/// every `#[tool]` is in a stage (on its name), and that every transition goes to a stage that
/// exists and that some stage's `to(..)` names (on its `to`). Every mistake in the block is
/// reported at once, on the offending tokens, and the block is still emitted. What it generates, by hand:
///
/// ```text
/// impl Toolbox for Coach {
///     fn tools(&self) -> &'static [ToolDecl] {
///         voqalize::__private::tool_table::<Self>(|| vec![
///             voqalize::__private::Arg::<Section>::declare(ToolInfo { name: "show", .. }),
///             voqalize::__private::declare_without_args(ToolInfo { name: "log_meal", .. }),
///         ])
///     }
///     fn __run_tool(&self, index: usize, arguments: Value) -> ToolRun<'_> {
///         match index {
///             0 => Box::pin(async move {
///                 let args = voqalize::__private::Arg::<Section>::parse(arguments)?;
///                 let out = Self::show(self, args).await;
///                 /* Ok(JSON of out), or Err(its text) for a Result's Err */
///             }),
///             /* ... */
///         }
///     }
/// }
/// // The argument check: one error, on `Section`, if it is not a struct implementing
/// // `Deserialize` and `JsonSchema` (an argument naming the impl's generics is declared with
/// // `declare::<A>` and parsed with `parse_args::<A>` instead, and checked at run time).
/// const _: () = { /* `<Section as NotAScalar<{ verdict != Scalar }>>::OK`, ... */ };
/// ```
#[proc_macro_attribute]
pub fn brain(attr: TokenStream, item: TokenStream) -> TokenStream {
    brain::expand(attr.into(), item.into()).into()
}

fn outside_brain(attr: &str, item: TokenStream) -> TokenStream {
    let message = format!(
        "`#[{attr}]` only works inside an impl block marked `#[brain]`: put `#[brain]` on the \
         `impl` that holds this method"
    );
    let item = proc_macro2::TokenStream::from(item);
    quote!(::core::compile_error!(#message); #item).into()
}

/// Marks a method of a `#[brain]` impl block as a tool. `#[tool(name = "...")]` names it (the
/// default is the method's name); the name must match `^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`.
///
/// An inert marker that `#[brain]` reads and removes: used anywhere else it is an error.
///
/// **Options**, any of, comma-separated: `name = "..."`; what a barge-in does to a running
/// call, `on_barge_in = finish` (the default: it runs on to its end and its result is filed) or
/// `on_barge_in = cancel` (it is stopped; the model reads that the user's interruption cancelled
/// it); `background` (it never holds its turn: the model reads at once that it started, and its
/// result later as a note); `timeout = "5s"` (`ms`, `s` or `m`; default the model's
/// `tool_timeout`, 10 s: past it the run is stopped and the model reads that it timed out);
/// `filler = "One moment..."` (spoken when the run keeps the caller waiting in silence). Every
/// call is answered exactly once, whatever happens. `background` with `#[needs_result_now]` or
/// with `on_barge_in = cancel`, a zero or malformed timeout and an unknown option are compile
/// errors.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let _ = attr;
    outside_brain(attr::TOOL, item)
}

/// Marks a tool whose result the model must read before it goes on: after a response that called
/// it, the model is asked again with the result. Goes above or below `#[tool]`.
///
/// An inert marker that `#[brain]` reads and removes: used anywhere else it is an error.
#[proc_macro_attribute]
pub fn needs_result_now(attr: TokenStream, item: TokenStream) -> TokenStream {
    let _ = attr;
    outside_brain(attr::NEEDS_RESULT_NOW, item)
}

/// Marks a method of a `#[brain(stages = ...)]` impl block as a transition: a tool that moves the
/// call to another stage. `#[transition(to = Stage)]`, with `context = keep|fresh|summary` (what
/// crosses the handoff; default `keep`) and any `#[tool]` option but `background`. Its return value
/// is the carried note; an `Err` refuses the move. See `voqalize::stages`.
///
/// An inert marker that `#[brain]` reads and removes: used anywhere else it is an error.
#[proc_macro_attribute]
pub fn transition(attr: TokenStream, item: TokenStream) -> TokenStream {
    let _ = attr;
    outside_brain(attr::TRANSITION, item)
}

/// Implements `voqalize::stages::Stages` on a fieldless enum: each variant a stage of a call's
/// workflow, its doc comment the stage's instruction, `#[stage(tools(..), to(..), mcp(..), end)]`
/// the rest, `#[stages(every(..))]` on the enum the tools of every stage. See `voqalize::stages`
/// for the grammar and the checks.
#[proc_macro_derive(Stages, attributes(stage, stages))]
pub fn derive_stages(input: TokenStream) -> TokenStream {
    derive::stages::expand(input.into()).into()
}

/// Derives `Serialize`, `Deserialize` and `JsonSchema` through voqalize's own serde and schemars,
/// so the crate needs neither as a dependency. `#[json_type(Deserialize, JsonSchema)]` derives a
/// subset. `#[serde(...)]`/`#[schemars(...)]` attributes work as usual. Put it above any
/// `#[derive]`.
///
/// An enum whose unit variants each have an integer value (`enum Pace { Slow = 1, Fast = 2 }`)
/// is an *integer enum*: its JSON is the number (`2`), a number that is no variant's is an error
/// naming the ones allowed, and its schema is `{"type": "integer", "enum": [1, 2]}` (which the
/// Gemini layer declares as strings and reads back as numbers). It takes no `#[serde]` attribute;
/// an enum where only some variants have a value is an error.
///
/// By hand:
///
/// ```text
/// #[derive(voqalize::__private::serde::Serialize, voqalize::__private::serde::Deserialize,
///          voqalize::__private::schemars::JsonSchema)]
/// #[serde(crate = "::voqalize::__private::serde")]
/// #[schemars(crate = "::voqalize::__private::schemars")]
/// struct Section { name: SectionName }
/// ```
#[proc_macro_attribute]
pub fn json_type(attr: TokenStream, item: TokenStream) -> TokenStream {
    derive::json_type::expand(attr.into(), item.into()).into()
}

/// Implements `voqalize::actions::Action` (a typed UI command) and `voqalize::typescript::Payloads`
/// (its payload shape for `voqalize types`).
///
/// **Grammar**: on a non-generic struct or enum; `#[action(name = "...")]` overrides the wire
/// name, which is otherwise the snake_case of the type's name (`OpenURL` → `open_url`,
/// `HTTPServer` → `http_server`, `Row2Added` → `row2_added`).
///
/// **Typing**: the type implements `Serialize` and `JsonSchema` (`#[json_type]` gives both).
///
/// **Errors**: a mistake is reported once, at the derive, which still implements both traits
/// (with the name it read, and no payload for `voqalize types`), so a `session.dispatch(&action)`
/// elsewhere adds no second error.
///
/// By hand: `impl Action for OpenUrl { const NAME: &'static str = "open_url"; }`.
#[proc_macro_derive(Action, attributes(action))]
pub fn derive_action(input: TokenStream) -> TokenStream {
    derive::action::expand(input.into()).into()
}

/// Implements `voqalize::actions::AppEvent` (an event the app sends the brain) and
/// `voqalize::typescript::Payloads`.
///
/// **Grammar**: on a non-generic struct (one event) or enum (one event per variant), with named
/// fields or none. The event name is the snake_case of the struct's or the variant's name,
/// overridable with `#[app_event(name = "...")]` on the struct or the variant. Field attributes
/// `#[serde(...)]`, `#[schemars(...)]` and doc comments are honoured, as are `rename_all` on a
/// struct or variant and `rename_all_fields` on an enum.
///
/// **Typing**: every field type implements `Deserialize` and `JsonSchema`; the event type itself
/// needs neither (a payload struct is generated per event).
///
/// **Semantics**: a payload field the event does not declare makes the event unreadable
/// (`deny_unknown_fields`), as does a missing required field; two events with one name are a
/// compile error.
///
/// **Errors**: every mistake is reported at the derive, which still implements both traits (with
/// no event names, so every payload is refused), so uses of the type add no second error.
#[proc_macro_derive(AppEvent, attributes(app_event, serde, schemars))]
pub fn derive_app_event(input: TokenStream) -> TokenStream {
    derive::app_event::expand(input.into()).into()
}
