//! # voqalize: write Voqalize brains in Rust
//!
//! Voqalize runs the voice of a call (speech recognition, synthesis, turn-taking, barge-in); a
//! *brain* decides what to say. One WebSocket per call carries protobuf frames (wire version 3):
//! the user's finalized text comes in, speech streams out in speech units, and Voqalize reports
//! what the user actually heard of each unit.
//!
//! A brain implements [`Brain`]: it speaks itself, or hands its turns to a model; [`host`] serves
//! it; the `voqalize-testing` crate drives it in tests.
//!
//! # Quick start
//!
//! ```no_run
//! use voqalize::prelude::*;
//!
//! /// Says back what it heard.
//! struct Echo;
//!
//! impl Brain for Echo {
//!     async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
//!         turn.say(&message.text); // SpeechStart, SpeechChunk, SpeechEnd
//!         Ok(())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//!     voqalize::host::serve(listener, || Echo, HostOptions::production()).await?;
//!     Ok(())
//! }
//! ```
//!
//! A model-backed brain is a `Brain` holding a [`Model`](voice::Model), with a
//! [`#[brain]`](macro@brain) impl of its [`#[tool]`](macro@tool)s, whose `on_user_message` calls
//! [`Model::respond`](voice::Model::respond); see [`voice`]. The README and `docs/model-brains.md` in the repository walk through both.
//!
//! The modules, bottom layer first: each uses only those above it in this table
//! (`scripts/module-deps` checks it, and that no two modules depend on each other, in the test
//! command). Private modules are in italics.
//!
//! | module | what it holds |
//! |---|---|
//! | [`wire`] | frames of wire v3, the codec, `Config`, the Language/Voice catalogs |
//! | *`buffer`* | byte buffers bounded in bytes |
//! | *`logline`* | bounded log output: strings from outside clipped and escaped, repeated warnings summed up |
//! | *`recover`* | surviving a panic: locks still usable after one, a panic's text |
//! | [`metrics`] | the metrics recorded through the `metrics` facade: names, kinds, labels, units |
//! | *`queue`* | the bounded queue behind every bulk lane |
//! | [`actions`] | typed UI commands ([`Action`](actions::Action)) and app events |
//! | [`record`] | recording calls (frames, model requests, tool calls) to JSON lines, and reading them back |
//! | [`session`] | [`Session`], [`Turn`] and [`SpeechUnit`]: the brain's handles on a call, and their state |
//! | [`channel`] | the transport traits every WebSocket adapter implements |
//! | [`brain`](mod@brain) | the [`Brain`] trait and [`MakeBrain`], how a brain is made per call |
//! | [`stages`] | a call's workflow stages: the `Stages` trait `#[derive(Stages)]` implements, what a transition carries |
//! | [`tools`] | tool declarations, the per-provider schema rewrites, the dispatcher |
//! | [`typescript`] | `voqalize types`: the TypeScript of a crate's actions and app events |
//! | *`private`* | what the macros' generated code names (`__private`) |
//! | *`runtime`* | one session's reader, feeder and writer, the inbound lanes, the turns |
//! | [`host`] | the direct leg: `serve`, `run_session`, token verification, probes, drain; the axum and tokio-tungstenite adapters (features `axum`, `tungstenite`) |
//! | `relay` | (feature `relay`, on by default) the relay leg: every call over one outbound connection to the Cortex relay |
//! | [`model`] | (feature `model`, on by default) the layer trait; the Gemini, OpenAI Responses, Anthropic, Interactions and chat-completions layers; our SSE parser, the pooled HTTP client |
//! | [`mcp`] | (feature `mcp`) MCP servers' tools beside the brain's: the connection (stdio, streamable HTTP), the tool list, each call |
//! | [`voice`] | (feature `model`) the voice core: [`Model`](voice::Model), one call's conversation with a model, which answers a brain's turns (from one layer, or a [`Fallback`](voice::Fallback) chain that moves on before the first words), runs its tools and walks its stages ([`Workflow`](voice::Workflow)) |
//! | `console` | (feature `console`) a local web page to talk to a brain in a browser: plays Voqalize against it on the direct leg |
//! | `logging` | (feature `logging`) one-call log set-up: human or JSON lines with the session's fields |
//! | [`prelude`] | every name a brain file needs |
//! | *`__kit`* | (hidden, not an API) the seams the `voqalize-testing` crate, the benchmarks and the fuzz target reach into |
//!
//! `docs/protocol.md` in the repository describes the wire and session rules this crate
//! implements; comments cite it as `docs/protocol.md §N`.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Built without a default feature, the docs still link to what that feature brings (the voice
// core, the relay). docs.rs and the test command build them with every feature, where each link
// resolves and a broken one fails the build.
#![cfg_attr(
    not(all(feature = "model", feature = "relay")),
    allow(rustdoc::broken_intra_doc_links)
)]

#[doc(hidden)]
pub mod __kit;
pub mod actions;
pub mod brain;
mod buffer;
pub mod channel;
#[cfg(feature = "console")]
#[cfg_attr(docsrs, doc(cfg(feature = "console")))]
pub mod console;
pub mod host;
#[cfg(feature = "logging")]
#[cfg_attr(docsrs, doc(cfg(feature = "logging")))]
pub mod logging;
mod logline;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
pub mod metrics;
pub mod model;
pub mod prelude;
mod private;
mod queue;
pub mod record;
mod recover;
#[cfg(feature = "relay")]
#[cfg_attr(docsrs, doc(cfg(feature = "relay")))]
pub mod relay;
mod runtime;
pub mod session;
pub mod stages;
pub mod tools;
pub mod typescript;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub mod voice;
pub mod wire;

/// The protobuf types generated from `proto/voqalize/frames/frames.proto` (prost). Most code uses
/// [`wire`] instead; these are here for peers that need the raw messages (hidden from the docs'
/// index: 30-odd generated pages would bury the API).
#[doc(hidden)]
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    include!("wire/generated/frames.rs");
}

pub use brain::{Brain, BrainError, BrainResult, MakeBrain};
pub use host::{HostError, HostOptions, run_session};
/// `serde_json`'s `json!`, so a brain and its tests write JSON values (tool arguments in a scripted
/// reply, an app event's payload, an RTVI message) without depending on `serde_json` themselves:
/// `voqalize::json!({"city": "Paris"})`.
pub use serde_json::json;
pub use session::{
    AnswerPart, EndReason, Finalized, HeardHistory, HeardLines, Session, SessionError, SpeechUnit,
    Step, Turn,
};
/// The macros, at the root where the docs show them (also in [`prelude`]).
pub use voqalize_macros::{
    Action, AppEvent, Stages, brain, json_type, needs_result_now, tool, transition,
};

// The checks and bounds that `#[brain]`'s compile errors name, re-exported (hidden) at the
// root, outside `__private` so that rustc names them by their bare names, without an SDK-internal path.
#[doc(hidden)]
pub use crate::private::{
    ArgsDeserialize, ArgsSchema, PlainKind, ResultKind, ToolFailure, ToolOutput, declare,
    parse_args,
};
#[doc(hidden)]
pub use crate::private::{
    Deserializable, JsonType, NotACollection, NotANewtype, NotAScalar, NotATupleStruct,
    NotAUnitStruct, NotAnEnum, NotAnOption, NotAnyJson, NotTheSession, WithJsonSchema,
};

/// What the code generated by voqalize's macros names. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::private::*;
    pub use crate::typescript::Discovered;
    pub use ::inventory;
    pub use ::schemars;
    pub use ::serde;
    pub use ::serde_json;
}

/// The README's Rust examples compile as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The Rust snippets of the hosting and testing guides compile as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/deploying.md")]
#[doc = include_str!("../../docs/testing.md")]
struct GuideDoctests;

/// The Rust snippets of the model-brains guide compile as doctests.
#[cfg(all(doctest, feature = "model"))]
#[doc = include_str!("../../docs/model-brains.md")]
struct ModelBrainsGuideDoctests;

/// The Rust snippets of the evals guide compile (and run) as doctests.
#[cfg(all(doctest, feature = "model"))]
#[doc = include_str!("../../docs/evals.md")]
struct EvalsGuideDoctests;

/// The Rust snippets of the MCP guide compile as doctests.
#[cfg(all(doctest, feature = "mcp"))]
#[doc = include_str!("../../docs/mcp.md")]
struct McpGuideDoctests;
