//! Tools: what a brain lets the model do, declared once on an impl block.
//!
//! ```
//! use voqalize::prelude::*;
//!
//! /// Which part of the screen to show.
//! #[json_type]
//! struct Section {
//!     /// The section's name, as the app spells it.
//!     name: String,
//! }
//!
//! struct Coach;
//!
//! #[brain]
//! impl Coach {
//!     /// Put a section of the screen in front of the user.
//!     #[tool]
//!     async fn show(&self, args: Section) -> String {
//!         format!("showing {}", args.name)
//!     }
//!
//!     /// The user's average glucose this week, in mmol/L.
//!     #[tool]
//!     #[needs_result_now]
//!     async fn weekly_average(&self) -> f64 {
//!         5.4
//!     }
//! }
//!
//! let names: Vec<_> = Coach.tools().iter().map(|t| t.name()).collect();
//! assert_eq!(names, ["show", "weekly_average"]);
//! ```
//!
//! # `#[brain]`
//!
//! *Grammar*: `#[brain]` or `#[brain(visible = method)]` on an inherent `impl` block (generics
//! allowed). Inside it, `#[tool]` / `#[tool(option, ...)]` (`name = "..."`, `on_barge_in =
//! finish|cancel`, `background`, `timeout = "..."`, `filler = "..."`) and `#[needs_result_now]`
//! mark methods; other items pass through untouched.
//!
//! *Typing*: each tool is `async fn name(&self) -> R` or `async fn name(&self, args: A) -> R` with
//! `A: Deserialize + JsonSchema` (one struct, owned) and `R: Serialize` or `R = Result<T, E>` with
//! `T: Serialize, E: Display`. The brain type is `Send + Sync + 'static` and each tool's future is
//! `Send`. `visible` names a method `fn(&self, &ToolDecl) -> bool`.
//!
//! *Semantics*: the impl block is emitted as written (attributes removed), plus
//! * `impl Toolbox for Type`: the tool table in declaration order ([`Toolbox::tools`]) and the
//!   dispatcher ([`Toolbox::call_tool`]);
//! * `fn session(&self) -> Session` on the type (unless the block defines its own `session`): the
//!   session serving the running tool or callback, in any method of the type (a tool, a `Brain`
//!   hook, a helper they call), read from the task-local context the runtime sets around every
//!   turn and callback. It panics when called elsewhere, e.g. in a task the brain spawned
//!   (clone the session into such tasks first).
//!
//! One `#[brain]` block per type. The macro only generates the tool table: it works on its own,
//! beside (not instead of) `impl Brain for Type`.
//!
//! # `#[tool]`
//!
//! The method is the declaration: its name is the function name (or `#[tool(name = "...")]`,
//! matching `^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`), its doc comment the description, its argument
//! struct the parameter object (field docs become property descriptions, in declaration order). No
//! argument declares `{"type":"object","properties":{}}`. A missing doc comment, a second
//! argument, a scalar or collection argument, a session parameter, a receiver other than `&self`, a
//! generic or non-`async` tool are compile errors.
//!
//! **When a barge-in cuts a tool.** The user cutting in stops the turn's speech at once; what
//! happens to a tool that is running is the tool's [`ToolPolicy`], declared on it: by default it
//! runs on to its end (within its timeout) and its call and result are filed, so the next request
//! shows the call answered once and the model never makes it again; `#[tool(on_barge_in =
//! cancel)]` stops it, and the model reads that the user's interruption cancelled it;
//! `#[tool(background)]` never holds its turn at all. A run is bounded by its timeout
//! (`#[tool(timeout = "...")]`, else the model's `tool_timeout`). No call is ever removed from
//! the conversation (docs/model-brains.md, "Tools and barge-in").
//!
//! # `#[needs_result_now]`
//!
//! Marks a tool whose result the model must read before it goes on speaking: after a response
//! that called it, the model is asked again ([`ToolDecl::needs_result_now`]). Above or below
//! `#[tool]`, never without it.
//!
//! # Argument types: `#[json_type]`
//!
//! An argument struct needs `serde::Deserialize` and `schemars::JsonSchema` (schemars 1.x).
//! `#[json_type]` derives `Serialize`, `Deserialize` and `JsonSchema` through voqalize's own copies,
//! so a crate needs no direct serde or schemars dependency; `#[json_type(Deserialize, JsonSchema)]`
//! picks a subset. `#[serde(...)]` and `#[schemars(...)]` attributes work as usual. A crate that
//! depends on serde and schemars 1.x itself can derive them directly instead.
//!
//! # Calls
//!
//! [`Toolbox::tools_for_turn`] reads the visible set once per turn (default: every tool;
//! `#[brain(visible = method)]` decides per tool from the brain's state). [`Toolbox::call_tool`]
//! runs a call against that set: the arguments are deserialised into the struct (integral floats,
//! as Gemini sends them, count as integers; `null` for an optional property that does not accept
//! it counts as absent), the method runs, and the result becomes JSON. An unknown or hidden tool,
//! arguments that do not fit (the message names the field's path), an `Err` from the tool and a
//! panic in it all come back as an error the model reads; none ends the turn. Each call is timed
//! ([`ToolOutcome::elapsed`]); `call_tool` itself bounds nothing (the voice core bounds each run
//! by its timeout). How loud a failure or a call over
//! [`TOOL_BUDGET_MS`] is, is the caller's to decide (the dispatcher notes both at debug level): the
//! voice core warns once per session, naming `Type::method` and the time, then counts, as a model
//! can call a slow tool sixteen times a reply, every turn.
//!
//! # Declarations per provider
//!
//! [`ToolDecl::schema`] is the neutral schema; [`ToolDecl::gemini`], [`ToolDecl::openai`] and
//! [`ToolDecl::chat`] give each provider's declaration with the rewrites of [`Dialect`].

// Tools added at run time come only from MCP toolsets (feature `mcp`); without it, the voice
// core still holds every tool through a `DeclRef`.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
mod added;
mod dispatch;
mod outcome;
#[cfg(feature = "model")]
pub(crate) use added::DeclRef;
use added::Origin;
#[cfg(feature = "mcp")]
pub(crate) use added::{Added, AddedDecl, AddedRun, AddedRunner};
#[cfg(feature = "model")]
pub(crate) use dispatch::call_added;
#[cfg(feature = "model")]
pub(crate) use dispatch::restore_enum_strings;
pub(crate) use dispatch::shortened;
#[cfg(feature = "model")]
pub(crate) use dispatch::shortened_to;
pub(crate) mod private;
pub(crate) mod schema;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Once, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::stages::{StageTable, Transition};

/// The JSON value of the tool results in `ToolRun`, which compile errors about a tool's future
/// name: re-exported (hidden) so that rustc does not name it through `__private::serde_json`.
#[doc(hidden)]
pub mod json {
    pub use serde_json::Value;
}

pub use outcome::{Arguments, ToolError, ToolErrorKind, ToolOutcome};
pub use schema::{Dialect, SchemaLoss};

/// How long a tool call may take before the voice core warns about it, in ms (once per session,
/// then a count per 10 s). Nothing is stopped at this budget (a run is stopped only at its
/// timeout): the user waited for the tool, and the warning says so.
pub const TOOL_BUDGET_MS: u64 = 20;

/// Everything a brain file needs from this module (re-exported by `voqalize::prelude`).
pub mod prelude {
    pub use super::{ToolDecl, Toolbox};
    pub use crate::actions::{Action, AppEvent};
    pub use crate::stages::Stages;
    pub use voqalize_macros::{
        Action, AppEvent, Stages, brain, json_type, needs_result_now, tool, transition,
    };
}

/// One tool's provider-neutral declaration: name, description, parameter schema and whether the
/// model must read its result before going on.
pub struct ToolDecl {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    needs_result_now: bool,
    policy: ToolPolicy,
    timeout: Option<Duration>,
    filler: Option<Cow<'static, str>>,
    method: Cow<'static, str>,
    /// Who runs the tool: the brain's dispatcher, or a runner outside it (an MCP server).
    origin: Origin,
    /// `#[transition(...)]`: where the tool moves the call.
    transition: Option<Transition>,
    has_arguments: bool,
    schema: Value,
    problem: Option<String>,
    rewritten: [OnceLock<schema::Rewritten>; 3],
    loss_warning: [Once; 3],
    strict_warning: Once,
}

impl fmt::Debug for ToolDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDecl")
            .field("name", &self.name)
            .field("method", &self.method)
            .field("needs_result_now", &self.needs_result_now)
            .field("policy", &self.policy)
            .field("timeout", &self.timeout)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl ToolDecl {
    pub(crate) fn new(info: ToolInfo, schema: Option<Value>, problem: Option<String>) -> Self {
        ToolDecl {
            name: Cow::Borrowed(info.name),
            description: Cow::Borrowed(info.description),
            needs_result_now: info.needs_result_now,
            policy: info.policy,
            timeout: info.timeout_ms.map(Duration::from_millis),
            filler: info.filler.map(Cow::Borrowed),
            method: Cow::Borrowed(info.method),
            origin: Origin::Brain { index: info.index },
            transition: info.transition,
            has_arguments: schema.is_some(),
            schema: schema.unwrap_or_else(schema::empty_parameters),
            problem,
            rewritten: Default::default(),
            loss_warning: [Once::new(), Once::new(), Once::new()],
            strict_warning: Once::new(),
        }
    }

    /// The function name the model calls.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the model reads about the tool: the method's doc comment (an MCP tool's: the
    /// server's description, clipped).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Whether the model is asked again, with the result, after a response that called this tool.
    pub fn needs_result_now(&self) -> bool {
        self.needs_result_now
    }

    /// What a barge-in does to a started run of this tool, and whether it holds its turn:
    /// `#[tool(on_barge_in = cancel)]`, `#[tool(background)]`, or [`ToolPolicy::Finish`].
    pub fn policy(&self) -> ToolPolicy {
        self.policy
    }

    /// How long one run may take, `#[tool(timeout = "...")]`: `None` takes the
    /// [`Model`](crate::voice::Model)'s `tool_timeout` (10 s by default).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The line spoken while a run of this tool keeps the caller waiting, `#[tool(filler =
    /// "...")]`: `None` takes the `Model`'s `filler_line`, if any.
    pub fn filler(&self) -> Option<&str> {
        self.filler.as_deref()
    }

    /// The Rust method behind the tool, as `Type::method`; for an MCP tool, `mcp:server/tool`
    /// (what logs name).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The name as a metrics label (no copy for a `#[tool]`'s).
    #[cfg(feature = "model")]
    pub(crate) fn label(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    /// The MCP server that runs this tool (the name its toolset was given), `None` for a
    /// `#[tool]` of the brain.
    pub fn mcp_server(&self) -> Option<&str> {
        match &self.origin {
            Origin::Brain { .. } => None,
            Origin::Added(added) => Some(&added.source),
        }
    }

    /// Where a `#[transition(to = ...)]` tool moves the call, and what crosses the handoff;
    /// `None` for any other tool.
    pub fn transition(&self) -> Option<Transition> {
        self.transition
    }

    /// Whether the tool takes an argument struct.
    pub fn has_arguments(&self) -> bool {
        self.has_arguments
    }

    /// The neutral parameter schema (schemars, draft 2020-12; `{"type":"object","properties":{}}`
    /// for a tool without an argument).
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    fn rewritten(&self, dialect: Dialect) -> &schema::Rewritten {
        self.rewritten[dialect.index()].get_or_init(|| schema::rewrite(&self.schema, dialect))
    }

    /// The parameter schema rewritten for `dialect`. The first time a tool that loses part of
    /// its schema to a provider is declared to it, one warning names the tool, the provider and
    /// each loss ([`losses`](Self::losses)).
    pub fn parameters(&self, dialect: Dialect) -> &Value {
        let rewritten = self.rewritten(dialect);
        if !rewritten.losses.is_empty() {
            self.loss_warning[dialect.index()].call_once(|| {
                let listed: Vec<String> = rewritten.losses.iter().map(ToString::to_string).collect();
                // An MCP tool's schema is a server's: its property names are clipped and
                // escaped like any text from outside.
                tracing::warn!(
                    "tool {} is declared to {} without part of its schema, so the model is not told: {}",
                    crate::logline::outside(&self.name),
                    dialect.provider(),
                    crate::logline::outside_n(&listed.join("; "), 1000)
                );
            });
        }
        &rewritten.schema
    }

    /// What the declaration for `dialect` drops or weakens of the neutral schema: a map's value
    /// type, an exclusive bound, a format... (Gemini's OpenAPI subset cannot say them; OpenAI's
    /// strict mode takes only some formats). Empty when the provider is told everything; a test
    /// can assert that for the providers a brain uses.
    pub fn losses(&self, dialect: Dialect) -> &[SchemaLoss] {
        &self.rewritten(dialect).losses
    }

    /// Why this tool cannot be declared with `strict: true` (a map field, a field of any JSON
    /// value...). Empty when it can. A tool that cannot be strict is declared `strict: false`.
    pub fn strict_problems(&self) -> &[String] {
        &self.rewritten(Dialect::OpenAiStrict).strict_problems
    }

    /// The strict flag actually sent, and the matching schema.
    pub(crate) fn openai_parameters(&self, strict: bool) -> (bool, &Value) {
        if !strict {
            return (false, self.parameters(Dialect::OpenAi));
        }
        let problems = self.strict_problems();
        if problems.is_empty() {
            return (true, self.parameters(Dialect::OpenAiStrict));
        }
        self.strict_warning.call_once(|| {
            tracing::warn!(
                "tool {} is declared with strict: false: {}",
                crate::logline::outside(&self.name),
                crate::logline::outside_n(&problems.join("; "), 1000)
            );
        });
        (false, self.parameters(Dialect::OpenAi))
    }

    /// A Gemini `FunctionDeclaration`: `{"name", "description", "parameters"}`, without
    /// `parameters` for a tool that takes no argument.
    pub fn gemini(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("description".into(), json!(self.description));
        if let Some(parameters) = self.gemini_parameters() {
            m.insert("parameters".into(), parameters.clone());
        }
        Value::Object(m)
    }

    /// The `parameters` of the Gemini declaration; `None` for a tool that takes no argument (its
    /// declaration has none).
    pub(crate) fn gemini_parameters(&self) -> Option<&Value> {
        let parameters = self.parameters(Dialect::Gemini);
        let empty = match parameters.get("properties") {
            Some(Value::Object(p)) => p.is_empty(),
            _ => true,
        };
        (!empty).then_some(parameters)
    }

    /// An OpenAI Responses function tool: `{"type":"function","name","description","parameters",
    /// "strict"}`. `strict: true` is honoured when the schema can meet strict mode's rules (see
    /// [`strict_problems`](Self::strict_problems)); otherwise the tool goes out `strict: false`.
    pub fn openai(&self, strict: bool) -> Value {
        let (strict, parameters) = self.openai_parameters(strict);
        json!({
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": parameters,
            "strict": strict,
        })
    }

    /// A chat-completions tool: `{"type":"function","function":{"name","description",
    /// "parameters"}}`, with `"strict": true` inside `function` only when strict is asked for and
    /// possible.
    pub fn chat(&self, strict: bool) -> Value {
        let (strict, parameters) = self.openai_parameters(strict);
        let mut function = Map::new();
        function.insert("name".into(), json!(self.name));
        function.insert("description".into(), json!(self.description));
        function.insert("parameters".into(), parameters.clone());
        if strict {
            function.insert("strict".into(), Value::Bool(true));
        }
        json!({"type": "function", "function": function})
    }
}

/// What happens to a tool's run when the user barges in while it runs, and whether the run holds
/// its turn (docs/model-brains.md, "Tools and barge-in"). Every call the model made is answered
/// exactly once, whichever it is: the model always reads what became of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ToolPolicy {
    /// `#[tool]`: the run holds its turn; a barge-in stops the speech but not the tool, which
    /// runs on to its end (within its timeout) and whose result is filed after its call. The next
    /// request waits for it, so the model reads the call answered once and does not repeat it.
    #[default]
    Finish,
    /// `#[tool(on_barge_in = cancel)]`: a barge-in drops the run at its next `.await`; the call is
    /// answered with a result saying the user's interruption cancelled it before it finished. For
    /// lookups with no side effect.
    Cancel,
    /// `#[tool(background)]`: the run never holds its turn. The model reads at once that it
    /// started; its result reaches the model later as a note (read from the next request on).
    /// For slow work the caller need not wait for.
    Background,
}

/// When a call was answered, against its turn: what the metrics' `end` label, the recording and
/// [`ToolRun`](crate::voice::ToolRun) say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunEnd {
    /// While its turn ran (or was refused before it ran).
    InTurn,
    /// After the user barged in on its turn: a `Finish` run that ran on, or a run a barge-in
    /// cancelled.
    AfterBargeIn,
    /// A `Background` run, ended whenever it ended.
    Background,
}

impl RunEnd {
    /// `in_turn`, `after_barge_in` or `background`.
    pub fn name(self) -> &'static str {
        match self {
            RunEnd::InTurn => "in_turn",
            RunEnd::AfterBargeIn => "after_barge_in",
            RunEnd::Background => "background",
        }
    }
}

impl ToolPolicy {
    /// The policy's name as logs, recordings and metrics show it: `finish`, `cancel`,
    /// `background`.
    pub fn name(self) -> &'static str {
        match self {
            ToolPolicy::Finish => "finish",
            ToolPolicy::Cancel => "cancel",
            ToolPolicy::Background => "background",
        }
    }
}

/// The tools the model may see and call in one turn (from [`Toolbox::tools_for_turn`], plus the
/// tools of the `Model`'s MCP toolsets, added by the voice core when the turn starts).
#[derive(Clone, Default)]
pub struct ToolSet {
    table: &'static [ToolDecl],
    visible: Vec<usize>,
    added: Vec<Arc<ToolDecl>>,
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(ToolDecl::name))
            .finish()
    }
}

impl ToolSet {
    /// No tools.
    pub fn empty() -> Self {
        ToolSet::default()
    }

    /// The tools of `table` that `visible` keeps, in table order. A tool whose argument is not a
    /// struct (logged when the table was built) is never in a set.
    pub fn from_table(
        table: &'static [ToolDecl],
        mut visible: impl FnMut(&ToolDecl) -> bool,
    ) -> Self {
        let visible = (0..table.len())
            .filter(|&i| table[i].problem.is_none() && visible(&table[i]))
            .collect();
        ToolSet {
            table,
            visible,
            added: Vec::new(),
        }
    }

    /// The declarations: the brain's in declaration order, then the added ones (MCP tools) in
    /// their toolsets' order.
    pub fn iter(&self) -> impl Iterator<Item = &ToolDecl> + '_ {
        let table = self.table;
        self.visible
            .iter()
            .map(move |&i| &table[i])
            .chain(self.added.iter().map(|d| &**d))
    }

    /// The tool called `name`, if it is in the set.
    pub fn get(&self, name: &str) -> Option<&ToolDecl> {
        self.iter().find(|t| t.name == name)
    }

    /// The tool called `name` as the voice core holds it while the call runs.
    #[cfg(feature = "model")]
    pub(crate) fn find(&self, name: &str) -> Option<DeclRef> {
        let table = self.table;
        if let Some(&i) = self.visible.iter().find(|&&i| table[i].name == name) {
            return Some(DeclRef::Brain(&table[i]));
        }
        self.added
            .iter()
            .find(|d| d.name == name)
            .map(|d| DeclRef::Added(d.clone()))
    }

    /// Adds tools run outside the brain. A tool whose name is already in the set (a `#[tool]`
    /// of the brain, or an earlier added one) is left out: its name is returned with the name
    /// of what holds it, for the caller to report.
    #[cfg(feature = "mcp")]
    pub(crate) fn add(&mut self, tools: &[Arc<ToolDecl>]) -> Vec<(String, String)> {
        let mut clashes = Vec::new();
        for tool in tools {
            if let Some(held) = self.get(&tool.name) {
                clashes.push((tool.method().to_owned(), held.method().to_owned()));
                continue;
            }
            self.added.push(tool.clone());
        }
        clashes
    }

    /// Whether the tool called `name` is in the set.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// How many tools the set holds.
    pub fn len(&self) -> usize {
        self.visible.len() + self.added.len()
    }

    /// Whether the set holds no tool (then a request declares no tools at all).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The Gemini `functionDeclarations` of the set.
    pub fn gemini(&self) -> Vec<Value> {
        self.iter().map(ToolDecl::gemini).collect()
    }

    /// The OpenAI Responses `tools` of the set.
    pub fn openai(&self, strict: bool) -> Vec<Value> {
        self.iter().map(|t| t.openai(strict)).collect()
    }

    /// The chat-completions `tools` of the set.
    pub fn chat(&self, strict: bool) -> Vec<Value> {
        self.iter().map(|t| t.chat(strict)).collect()
    }

    fn holds(&self, decl: &ToolDecl) -> bool {
        self.visible
            .iter()
            .any(|&i| std::ptr::eq(&self.table[i], decl))
    }
}

/// The future of one tool call.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutcome> + Send + 'a>>;

/// A brain's tool table and dispatcher. `#[brain]` implements it; write it by hand only for a
/// brain without tools (`#[brain] impl MyBrain {}` does that too).
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no tool table: its impl block needs `#[brain]`",
    label = "the model reads this brain's tools",
    note = "put `#[brain]` on the impl that holds its `#[tool]`s, or write `#[brain] impl {Self} {{}}` for a brain with none"
)]
pub trait Toolbox: Send + Sync + 'static {
    /// Every tool, in declaration order.
    fn tools(&self) -> &'static [ToolDecl];

    /// Whether the model may see, and so call, `tool` this turn. Default: every tool. Set with
    /// `#[brain(visible = method)]`.
    fn tool_visible(&self, tool: &ToolDecl) -> bool {
        let _ = tool;
        true
    }

    /// This turn's tools: read once when the turn starts.
    ///
    /// A tool whose argument's schema turns out not to be an object is never in the set. Most
    /// such arguments are compile errors (scalars, collections, `Option`, JSON values, and for
    /// `#[json_type]` types enums, unit, tuple and newtype-around-a-scalar structs); what only
    /// the schema reveals at run time (a type deriving `JsonSchema` by hand or through
    /// `#[serde(from/into)]`, an argument naming the impl's generics) is refused when the tool
    /// table is built, with one `error`-level log naming the tool and why.
    fn tools_for_turn(&self) -> ToolSet {
        ToolSet::from_table(self.tools(), |t| self.tool_visible(t))
    }

    /// Runs a call to `name` from a turn whose tools are `turn`. Never fails: every problem becomes
    /// an error result the model reads (see [`ToolErrorKind`]). A tool outside `turn` is not run.
    fn call_tool<'a>(&'a self, turn: &ToolSet, name: &str, arguments: Arguments) -> ToolFuture<'a> {
        dispatch::call(self, turn, name, arguments)
    }

    /// The brain's stages, `#[brain(stages = ...)]`: the voice core then declares each request
    /// only the current stage's tools and transitions that [`tool_visible`](Self::tool_visible)
    /// also shows (and no longer calls [`tools_for_turn`](Self::tools_for_turn)); see
    /// [`stages`](crate::stages). Default: none.
    fn stage_table(&self) -> Option<StageTable> {
        None
    }

    #[doc(hidden)]
    fn __run_tool<'a>(&'a self, index: usize, arguments: Value) -> ToolRun<'a>;

    /// `brain` (the call's brain, as the runtime holds it) as a shared `Toolbox`, when it is this
    /// very brain: a tool run that outlives its turn (a barge-in while it runs, a background
    /// tool) holds the brain through it. `#[brain]` generates it; `None` runs every tool inside
    /// its turn.
    #[doc(hidden)]
    fn __shared(&self, brain: SharedBrain) -> Option<std::sync::Arc<dyn Toolbox>> {
        let _ = brain;
        None
    }
}

/// The call's brain as the runtime holds it (what `Toolbox::__shared` is given).
#[doc(hidden)]
pub type SharedBrain = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// The future `Toolbox::__run_tool` returns (what `#[brain]`'s dispatcher builds).
#[doc(hidden)]
pub type ToolRun<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// What `#[brain]` knows about a tool at compile time (its generated code fills one per tool).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct ToolInfo {
    /// The function name.
    pub name: &'static str,
    /// The doc comment.
    pub description: &'static str,
    /// `#[needs_result_now]`.
    pub needs_result_now: bool,
    /// `#[tool(on_barge_in = ...)]` or `#[tool(background)]`.
    pub policy: ToolPolicy,
    /// `#[tool(timeout = "...")]`, in ms.
    pub timeout_ms: Option<u64>,
    /// `#[tool(filler = "...")]`.
    pub filler: Option<&'static str>,
    /// `Type::method`.
    pub method: &'static str,
    /// Position in the impl block (the dispatcher's key).
    pub index: usize,
    /// `#[transition(to = ..., context = ...)]`.
    pub transition: Option<Transition>,
}

/// Rewrites any JSON value as a parameter schema for `dialect`, as tool declarations do. For the
/// workspace's fuzz loop (`tools/src/bin/fuzz.rs`, target `schema`): a rewrite must never panic,
/// whatever the schema. Not a public API.
#[doc(hidden)]
pub fn __rewrite_schema(schema: &Value, dialect: Dialect) -> Value {
    schema::rewrite(schema, dialect).schema
}
