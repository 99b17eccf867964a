//! Model-backed brains: the voice core (docs/protocol.md §6).
//!
//! A model-backed brain is any [`Brain`](crate::brain::Brain) holding a [`Model`], with a
//! `#[brain]` impl of its tools; its `on_user_message` hands the turn to the model:
//!
//! ```no_run
//! use voqalize::prelude::*;
//! use voqalize::model::Gemini;
//!
//! struct Coach {
//!     model: Model,
//! }
//!
//! impl Brain for Coach {
//!     async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
//!         self.model.respond(self, turn).await
//!     }
//! }
//!
//! #[brain]
//! impl Coach {
//!     /// Record that the user ate, now.
//!     #[tool]
//!     async fn log_meal(&self) -> &'static str {
//!         "logged"
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let gemini = Gemini::from_env().build()?; // GOOGLE_API_KEY or GEMINI_API_KEY
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//! voqalize::host::serve(
//!     listener,
//!     move || Coach { model: Model::new(gemini.clone()).instruction("You are a diabetes coach.") },
//!     HostOptions::production(),
//! )
//! .await?;
//! # Ok(()) }
//! ```
//!
//! The SDK then runs every turn: [`Model::respond`] adds the user's words to the conversation,
//! the model streams its answer, speech opens on the first word, each tool runs the moment its
//! call arrives (after the words before it are on the wire) and its result is filed right after
//! the call, a `#[needs_result_now]` tool makes the model read its result at once, and before
//! every request the conversation is cut down to what the user actually heard of each unit (the
//! session's `Finalize`s). The connection to the provider is opened when the `Model` is made. The
//! brain's other callbacks are its own: nothing in them feeds the model, so none has to be
//! written. What a provider sends is bounded in bytes, counts and time (the bounds among
//! [`Model`]'s settings, docs/protocol.md §6.14).

pub(crate) mod ask;
/// Request building measured in isolation: a hook for `tools/benches/voice.rs` and the fuzz target,
/// reached as `__kit::bench` (not an API to build on).
pub(crate) mod bench;
mod bounds;
mod conversation;
mod filing;
mod guard;
mod layers;
mod long_call;
#[cfg(feature = "mcp")]
mod mcp_tools;
mod report;
mod response;
mod runs;
mod spans;
mod taping;
mod tool_guard;
mod turn;
mod workflow;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bounds::Bounds;
use conversation::Conversation;
use report::TurnLog;
use serde_json::Value;
use tool_guard::Guards;

use crate::brain::BrainResult;
use crate::model::http;
use crate::model::origin::Origin;
use crate::recover::lock;
use crate::session::context;
use crate::session::{Finalized, Listener, Session, Turn};
use crate::tools::Toolbox;

pub use crate::model::ToolChoice;
pub use layers::{
    BREAKER_COOLING, BREAKER_FAILURES, Breaker, Fallback, FallbackError, MAX_FALLBACK_LAYERS,
    MAX_RETRY_AFTER, ModelLayer,
};
pub use long_call::{
    HIGH_WATER_PERCENT, HISTORY_SUMMARY_TIMEOUT, HISTORY_TOKEN_BUDGET, HistorySummary,
    MAX_HISTORY_SUMMARY_BYTES, MAX_PINNED_BYTES, MAX_PINNED_NOTES, SummaryError,
};
pub use tool_guard::{GuardedCall, Refusal, ToolRun};
pub use workflow::{
    MAX_NOTE_BYTES, MAX_SUMMARY_BYTES, MAX_TRANSITIONS_PER_TURN, SUMMARY_TIMEOUT, StageChange,
    StageError, Workflow,
};

/// The most tool calls of one response [`Model::parallel_tools`] lets run at once.
pub const MAX_PARALLEL_TOOLS: usize = 16;

/// How long a tool's run may take when neither the tool (`#[tool(timeout = "...")]`) nor the
/// model ([`Model::tool_timeout`]) says: 10 s.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a tool's run may take: an hour, as for `#[tool(timeout = "...")]` (a run is the
/// caller's wait, or a task the call holds after a barge-in or in the background).
const MAX_TOOL_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long a tool keeps the caller waiting in silence before its filler line is spoken, unless
/// [`Model::filler_after`] says otherwise: 2 s.
pub const FILLER_AFTER: Duration = Duration::from_secs(2);

/// The most bytes of JSON one tool result the model reads takes, unless
/// [`Model::max_result_bytes`] says otherwise: 64 KiB.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone)]
struct Settings {
    max_tool_hops: usize,
    parallel_tools: usize,
    report_steps: bool,
    fallback: Option<String>,
    max_history: usize,
    max_history_bytes: usize,
    bounds: Bounds,
    guards: Guards,
    tool_timeout: Duration,
    max_result_bytes: usize,
    filler: Option<Arc<str>>,
    filler_after: Duration,
    /// The stages' settings, `Model::workflow`.
    workflow: Option<Arc<workflow::Setup>>,
    /// Summaries of a long call's history, `Model::summarize_history`.
    summary: Option<Arc<long_call::HistorySummary>>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_tool_hops: 6,
            parallel_tools: 1,
            report_steps: true,
            fallback: None,
            max_history: 400,
            max_history_bytes: bounds::MAX_HISTORY_BYTES,
            bounds: Bounds::default(),
            guards: Guards::default(),
            tool_timeout: TOOL_TIMEOUT,
            max_result_bytes: MAX_RESULT_BYTES,
            filler: None,
            filler_after: FILLER_AFTER,
            workflow: None,
            summary: None,
        }
    }
}

struct Inner {
    layer: ModelLayer,
    settings: Settings,
    instruction: Mutex<Option<Arc<str>>>,
    /// The origins of the layers that answered this call (a handful: the stages' chains),
    /// made once and shared by the model turns they write.
    origins: Mutex<Vec<Origin>>,
    conversation: Arc<Mutex<Conversation>>,
    /// The summary of older history in flight, if any (`long_call.rs`).
    summaries: long_call::Summaries,
    /// It follows a session (see [`Model::new`]).
    attached: AtomicBool,
    /// What the session's turns log, each kind summed up (docs/protocol.md §6.14).
    log: Mutex<TurnLog>,
    /// A call was answered: a request waiting for every call's answer looks again.
    settled: tokio::sync::Notify,
    /// A `background` tool ran inside its turn (its toolbox was not the call's brain): said once.
    warned_background: AtomicBool,
    /// The call's stage, when the `Model` follows stages.
    workflow: Mutex<Option<workflow::Machine>>,
    /// The brain's stages are not the `Model`'s: said once.
    warned_stages: AtomicBool,
    /// A handoff summary failed: said once.
    warned_summary: AtomicBool,
    /// An MCP tool was left out of a turn for a name another tool has: said once.
    #[cfg(feature = "mcp")]
    warned_clash: AtomicBool,
    /// The stages' MCP toolsets were checked against the ones lent (at the first staged turn).
    #[cfg(feature = "mcp")]
    checked_mcp: AtomicBool,
    /// The MCP toolsets whose tools join each turn's, in the order given (`Model::mcp`, and
    /// `Model::add_mcp` during the call).
    #[cfg(feature = "mcp")]
    mcp: Mutex<Vec<crate::mcp::McpToolset>>,
    /// The MCP tool lists last written to the call's recording, by toolset.
    #[cfg(feature = "mcp")]
    taped_mcp: Mutex<Vec<std::sync::Weak<[Arc<crate::tools::ToolDecl>]>>>,
}

impl Inner {
    fn new(layer: ModelLayer, settings: Settings, instruction: Option<Arc<str>>) -> Self {
        Inner {
            workflow: Mutex::new(settings.workflow.clone().map(workflow::Machine::new)),
            conversation: Arc::new(Mutex::new(Conversation::new(
                settings.max_history,
                long_call::history_bytes(
                    settings.summary.as_deref(),
                    settings.max_history_bytes,
                    &**layer.layer(),
                ),
            ))),
            summaries: long_call::Summaries::default(),
            layer,
            settings,
            instruction: Mutex::new(instruction),
            origins: Mutex::new(Vec::new()),
            attached: AtomicBool::new(false),
            log: Mutex::new(TurnLog::default()),
            settled: tokio::sync::Notify::new(),
            warned_background: AtomicBool::new(false),
            warned_stages: AtomicBool::new(false),
            warned_summary: AtomicBool::new(false),
            #[cfg(feature = "mcp")]
            warned_clash: AtomicBool::new(false),
            #[cfg(feature = "mcp")]
            checked_mcp: AtomicBool::new(false),
            #[cfg(feature = "mcp")]
            mcp: Mutex::new(Vec::new()),
            #[cfg(feature = "mcp")]
            taped_mcp: Mutex::new(Vec::new()),
        }
    }
}

/// The session tells the conversation what happens on the call.
impl Listener for Inner {
    fn user_said(&self, text: &str) {
        lock(&self.conversation).push_user(text);
    }

    fn heard(&self, finalized: &Finalized) {
        lock(&self.conversation).heard(
            finalized.speech_id,
            &finalized.heard,
            finalized.interrupted(),
        );
        long_call::after(self);
    }
}

/// The voice core of one session: a model layer, the system instruction, and the conversation.
///
/// Make one per call, in the brain factory: it holds that call's history. Making one is cheap;
/// the layer (and the HTTP connection pool under every layer) is shared. It is deliberately not
/// `Clone`: a copy shared between calls would mix their conversations.
///
/// A brain uses it from `on_user_message` with [`respond`](Self::respond); nothing else needs
/// wiring. Made in the brain factory, it follows that call from its first frame: the user's words
/// join the conversation as each turn answering them starts, every `Finalize` cuts it to what the
/// user heard (docs/protocol.md §6.10), and a pooled connection to the provider is opened in the
/// background, so the first turn pays no DNS or TLS handshake. A `Model` made elsewhere follows
/// the call of the first turn it answers, from that turn on.
pub struct Model {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("layer", &self.inner.layer)
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// A voice core over `layer`, with no system instruction, `max_tool_hops` 6, TurnSteps
    /// reported, no fallback line, at most 400 history entries and 1 MiB of history, and every
    /// response bound at its default (see the bounds below and docs/protocol.md §6.14).
    pub fn new(layer: impl Into<ModelLayer>) -> Model {
        let model = Model {
            inner: Arc::new(Inner::new(layer.into(), Settings::default(), None)),
        };
        if let Some(call) = context::current() {
            model.attach(&call.session);
        }
        model
    }

    fn with(self, change: impl FnOnce(&mut Settings)) -> Model {
        let mut settings = self.inner.settings.clone();
        change(&mut settings);
        let instruction = lock(&self.inner.instruction).clone();
        let model = Model {
            inner: Arc::new(Inner::new(self.inner.layer.clone(), settings, instruction)),
        };
        #[cfg(feature = "mcp")]
        {
            *lock(&model.inner.mcp) = lock(&self.inner.mcp).clone();
        }
        // The old core is dropped with `self`, and with it its place on the session.
        if self.inner.attached.load(Ordering::Acquire)
            && let Some(call) = context::current()
        {
            model.listen_to(&call.session);
        }
        model
    }

    /// The system instruction every request carries (set it per session later with
    /// [`set_instruction`](Self::set_instruction)).
    #[must_use]
    pub fn instruction(self, text: impl Into<String>) -> Model {
        self.set_instruction(text);
        self
    }

    /// How many times a turn asks the model again after a `#[needs_result_now]` tool (default 6).
    /// The last of those requests may not call a tool. 0 never asks again.
    #[must_use]
    pub fn max_tool_hops(self, hops: usize) -> Model {
        self.with(|s| s.max_tool_hops = hops)
    }

    /// How many of one response's tool calls may run at once (default 1: each runs to its end
    /// before the stream is read on; at most [`MAX_PARALLEL_TOOLS`], 16).
    ///
    /// Above 1, a call's tool starts as soon as the speech before it in the stream has gone out,
    /// and the stream is read on (and spoken) while it runs; once `n` run, the next call waits for
    /// one to end. Results are filed in call order, right after their calls, whichever finishes
    /// first. A `#[needs_result_now]` follow-up is asked once, after the response has ended and
    /// every call has its result. A barge-in treats each running tool by its policy, as with one
    /// at a time (see [`ToolPolicy`](crate::tools::ToolPolicy)). A stream that fails or stalls, or
    /// the turn deadline, stops the reading only: the running tools finish and their results are
    /// filed, as with one tool at a time. Turn it up when a model asks for
    /// several slow lookups at once (a weather and a calendar); keep 1 when tools must run one
    /// after another (the second reads what the first changed).
    #[must_use]
    pub fn parallel_tools(self, n: usize) -> Model {
        self.with(|s| s.parallel_tools = n.clamp(1, MAX_PARALLEL_TOOLS))
    }

    /// Whether `model` and `tool` TurnSteps are reported (default true; they are sent only when
    /// the runtime advertises `turn_steps`).
    #[must_use]
    pub fn report_steps(self, on: bool) -> Model {
        self.with(|s| s.report_steps = on)
    }

    /// A line spoken when a turn's model request fails, or its deadline passes, before anything
    /// was said ("Sorry, I didn't catch that — could you say it again?"), so an outage never
    /// leaves the caller in silence. None by default.
    #[must_use]
    pub fn fallback_line(self, line: impl Into<String>) -> Model {
        let line = line.into();
        self.with(|s| s.fallback = Some(line))
    }

    /// The most history entries kept (default 400; 8 at least); the oldest whole exchanges go
    /// first (unless [`summarize_history`](Self::summarize_history) summarised them before).
    #[must_use]
    pub fn max_history(self, entries: usize) -> Model {
        self.with(|s| s.max_history = entries)
    }

    /// The most bytes of history kept (default 1 MiB; 1 KiB at least), counted at what the
    /// history holds: text, ids, names and arguments at their length, the provider's own JSON
    /// (signatures, reasoning, parts the SDK does not know), results and JSON arguments at what
    /// they take in memory (each object and list with its overhead: `{"a":0}` counts some 360
    /// bytes), and about 200 bytes for each part. Past it the oldest whole exchanges go first, as
    /// with [`max_history`](Self::max_history); the exchange in progress is kept whole (its own
    /// size is bounded by the turn's bounds below). A Gemini layer keeps the history it sent, as
    /// the bytes it wrote, for the next request to copy rather than serialise again: at most this
    /// many bytes more.
    #[must_use]
    pub fn max_history_bytes(self, bytes: usize) -> Model {
        self.with(|s| s.max_history_bytes = bytes)
    }

    /// The most bytes of one model response (default 1 MiB), counted twice: on the response body
    /// as it arrives, and on what the response keeps in the history (and what one of its events
    /// takes while it is read), counted as [`max_history_bytes`](Self::max_history_bytes) counts
    /// it, so a response of tiny JSON values cannot hold sixty times what it sent. Past either the
    /// response is cut: nothing more of it is read nor kept (a value past it is read through,
    /// never built), what was spoken stays, and the turn's one warning is logged
    /// (docs/protocol.md §6.14). Fillers and tools' progress lines are kept as the response's
    /// words too: one past it is not spoken.
    #[must_use]
    pub fn max_response_bytes(self, bytes: usize) -> Model {
        self.with(|s| s.bounds.response_bytes = bytes)
    }

    /// The most parts one model response keeps in the history (default 128; 1 at least): text,
    /// thoughts and reasoning items, calls, and parts the SDK does not know but keeps for replay.
    /// Consecutive plain text is one part, however many deltas it came in, so a response has few
    /// parts; the bound is for a provider that sends a hundred thousand tiny ones, each costing
    /// memory and replayed in every later request. The part past it is not kept (a call among them is not
    /// read, so it neither runs nor needs an answer) and the response is cut there: nothing more
    /// of it is read, what was spoken stays, and the turn's one warning is logged.
    #[must_use]
    pub fn max_parts_per_response(self, parts: usize) -> Model {
        self.with(|s| s.bounds.parts_per_response = parts.max(1))
    }

    /// The most function calls taken from one model response (default 16). The call past it does
    /// not run: it is answered with an error result the model reads, and the response is cut
    /// there (nothing after it is read).
    #[must_use]
    pub fn max_calls_per_response(self, calls: usize) -> Model {
        self.with(|s| s.bounds.calls_per_response = calls)
    }

    /// The most bytes of one call's arguments (default 64 KiB). A call with more does not run:
    /// it stays in the history with no arguments, answered with an error result the model
    /// reads, and the response is cut there.
    #[must_use]
    pub fn max_argument_bytes(self, bytes: usize) -> Model {
        self.with(|s| s.bounds.argument_bytes = bytes)
    }

    /// The most tools one turn runs, over all its requests (default 16). The call past it does
    /// not run: it is answered with an error result the model reads, the response is cut there,
    /// and a follow-up the turn still owes is its last request, with tools off.
    #[must_use]
    pub fn max_tool_runs(self, runs: usize) -> Model {
        self.with(|s| s.bounds.tool_runs = runs)
    }

    /// Checks every tool call before its tool runs: `guard` sees the tool's name and arguments
    /// and the turn, and returns `Ok(())` to let it run or a [`Refusal`] the model reads instead
    /// of a result. It fails closed: a guard that returns [`Refusal::failed`] or panics refuses
    /// the call too (the failure is logged, the model reads only that the check failed). A refused
    /// call does not run and counts against no tool bound; it is reported as a `guard` TurnStep
    /// (name: the tool, count `refused` or `failed`) and logged once, then summed up. Typical
    /// uses: authorisation by the caller's state, a per-call spending cap.
    ///
    /// The guard is synchronous and runs on the turn's task between the call and its tool: keep
    /// it cheap, and read what it needs from the brain's state (shared through an `Arc` with the
    /// factory that made this `Model`). One guard per `Model`: a second call replaces the first.
    #[must_use]
    pub fn before_tool(
        self,
        guard: impl Fn(&GuardedCall<'_>) -> Result<(), Refusal> + Send + Sync + 'static,
    ) -> Model {
        let guard: Arc<tool_guard::BeforeTool> = Arc::new(guard);
        self.with(|s| s.guards.before = Some(guard))
    }

    /// Checks every result before the model reads it: `guard` sees the call and the response the
    /// model would read (`{"result": ...}`, or `{"error": "..."}` for a tool that failed), which it
    /// may rewrite (redact a secret, shorten a list), and returns `Ok(())` to let the model read
    /// it, or a [`Refusal`] whose message the model reads instead. It fails closed: a guard that
    /// returns [`Refusal::failed`] or panics withholds the result (the model reads that the check
    /// failed). Refusals and failures are reported and logged as for
    /// [`before_tool`](Self::before_tool). It does not run for a call that did not run. One guard
    /// per `Model`.
    #[must_use]
    pub fn after_tool(
        self,
        guard: impl Fn(&GuardedCall<'_>, &mut Value) -> Result<(), Refusal> + Send + Sync + 'static,
    ) -> Model {
        let guard: Arc<tool_guard::AfterTool> = Arc::new(guard);
        self.with(|s| s.guards.after = Some(guard))
    }

    /// Calls `observer` with every answered tool call: its name, arguments, the response the
    /// model reads (after the guards), how long it ran, how it ended and when (in its turn, after
    /// a barge-in, in the background), its session and turn. For audit logs and for the voice
    /// console's timeline; it cannot change anything (a guard can). It runs where the call is
    /// answered (the turn's task, or the run's own after a barge-in): keep it cheap. A panic in it
    /// is logged and forgotten. Each call adds one more observer; all are told, in the order
    /// they were added.
    #[must_use]
    pub fn on_tool_run(self, observer: impl Fn(&ToolRun<'_>) + Send + Sync + 'static) -> Model {
        let observer: Arc<tool_guard::OnToolRun> = Arc::new(observer);
        self.with(|s| s.guards.observers.push(observer))
    }

    /// How long one run of a tool may take when the tool does not say
    /// (`#[tool(timeout = "...")]`): default [`TOOL_TIMEOUT`], 10 s. Past it the run is dropped at
    /// its next `.await` and the model reads that it timed out (what it did before stands). It
    /// bounds too how long the next request waits for a run that goes on after a barge-in. A zero
    /// timeout is taken as 1 ms, and one over an hour as an hour (the longest a tool may declare).
    #[must_use]
    pub fn tool_timeout(self, timeout: Duration) -> Model {
        self.with(|s| s.tool_timeout = timeout.clamp(Duration::from_millis(1), MAX_TOOL_TIMEOUT))
    }

    /// The most bytes of JSON one tool result takes in the conversation (default
    /// [`MAX_RESULT_BYTES`], 64 KiB; 256 at least), a background tool's note included: past it
    /// the model reads the start of the result's JSON text and that it was cut. Every later
    /// request replays each result, so a megabyte of search hits would cost every turn after it.
    #[must_use]
    pub fn max_result_bytes(self, bytes: usize) -> Model {
        self.with(|s| s.max_result_bytes = bytes.max(256))
    }

    /// The line spoken when a tool keeps the caller waiting in silence past
    /// [`filler_after`](Self::filler_after) ("One moment..."), for tools that name no filler of
    /// their own (`#[tool(filler = "...")]`). None by default: then only tools that name one
    /// have a filler. It is spoken as the model's words, in the response's speech (the model
    /// reads it, cut to what was heard), at most once in a row.
    #[must_use]
    pub fn filler_line(self, line: impl Into<String>) -> Model {
        let line: Arc<str> = line.into().into();
        self.with(|s| s.filler = (!line.trim().is_empty()).then_some(line))
    }

    /// How long a tool may keep the caller waiting with nothing said since its call before its
    /// filler is spoken (default [`FILLER_AFTER`], 2 s; `Duration::MAX`: never).
    #[must_use]
    pub fn filler_after(self, after: Duration) -> Model {
        self.with(|s| s.filler_after = after)
    }

    /// How long a turn may wait on the model, from the user's words (default 60 s): opening
    /// requests and reading their streams, never a tool that is running. Past it the stream is
    /// dropped and the turn ends; what was spoken stays, and the fallback line is spoken when the
    /// turn had said nothing. A stream of keep-alives can hold a turn no longer than this.
    /// `Duration::MAX` is a century.
    #[must_use]
    pub fn turn_deadline(self, deadline: Duration) -> Model {
        self.with(|s| s.bounds.turn_deadline = deadline)
    }

    /// Replaces the system instruction, from now on (typically from `on_session_start`, where the
    /// user's facts are). A blank instruction sends none.
    pub fn set_instruction(&self, text: impl Into<String>) {
        let text = text.into();
        *lock(&self.inner.instruction) = (!text.trim().is_empty()).then(|| Arc::from(text));
    }

    /// The instruction of the next request: the `Model`'s, then the current stage's.
    fn instruction_now(&self) -> Option<Arc<str>> {
        let base = lock(&self.inner.instruction).clone();
        match lock(&self.inner.workflow).as_mut() {
            Some(machine) => machine.instruction(base),
            None => base,
        }
    }

    fn conversation(&self) -> MutexGuard<'_, Conversation> {
        lock(&self.inner.conversation)
    }

    /// Adds a note to the conversation as a user turn, now: an app event the model should know
    /// about ("(The user confirmed booking 4411 on screen.)"). Safe from a tool and from `on_rtvi`
    /// during a turn: a note never lands between a call and its result, and heard truth never
    /// rewrites it. The request in flight does not see it; the next one does.
    pub fn append_note(&self, text: &str) {
        self.conversation().push_note(text);
    }

    /// Asks the model and speaks its answer, with tools on auto: the conversation holds the
    /// user's words by then (see [`Model`]).
    ///
    /// A failed request (connect error, HTTP error with the provider's body, a timeout, a stream
    /// that ends before its terminal event) is logged with the provider and the status (the
    /// session's first, then a count per 10 s), reported as a `model` TurnStep, and ends the turn; what was spoken stays spoken, and the fallback
    /// line is spoken if the turn had said nothing. So does a turn past its
    /// [`turn_deadline`](Self::turn_deadline). A response that passes one of the other bounds
    /// (bytes, calls, argument bytes, tool runs) is cut there and the turn goes on
    /// (docs/protocol.md §6.14). It never returns an error for a model failure.
    ///
    /// # Errors
    /// A panic inside the turn (the voice core's, or a layer's code it runs in line), after the
    /// fallback line was spoken when nothing had been: the runtime logs it as the turn's error.
    /// Model failures are not errors: they are logged, reported and covered by the fallback
    /// line.
    pub async fn respond(&self, brain: &dyn Toolbox, turn: &Turn) -> BrainResult {
        self.respond_with(brain, turn, ToolChoice::Auto).await
    }

    /// [`respond`](Self::respond) with a tool choice for this turn: `ToolChoice::None` to make the
    /// model speak, `ToolChoice::only("name")` to make it call one tool. Tools stay declared.
    ///
    /// # Errors
    /// As [`respond`](Self::respond).
    pub async fn respond_with(
        &self,
        brain: &dyn Toolbox,
        turn: &Turn,
        choice: ToolChoice,
    ) -> BrainResult {
        self.follow(turn);
        // A panic in the voice core or in code it runs in line (a layer's decoder) ends the turn
        // as a failed request does: the fallback line when nothing was said, the cause logged
        // by the runtime with the turn's error.
        let run = std::panic::AssertUnwindSafe(turn::run(self, brain, turn, choice));
        let done = match futures_util::FutureExt::catch_unwind(run).await {
            Ok(done) => done,
            Err(panic) => {
                if !turn.has_spoken()
                    && let Some(line) = self.fallback_now()
                {
                    self.say_aside(turn, &line);
                }
                Err(format!(
                    "the model turn panicked: {}",
                    crate::recover::panic_text(panic.as_ref())
                )
                .into())
            }
        };
        long_call::after(&self.inner);
        done
    }

    /// Speaks `line` as one unit without asking the model; the model reads it as its own words
    /// from the next request on, cut to what the user heard ("One moment, I'm checking."). Returns
    /// the unit's speech id.
    pub fn say_line(&self, turn: &Turn, line: &str) -> u64 {
        self.speak_line(turn, line, true)
    }

    /// Speaks `line` as one unit that the model never sees (a fallback or a legal notice the
    /// model should not build on). Returns the unit's speech id.
    pub fn say_aside(&self, turn: &Turn, line: &str) -> u64 {
        self.speak_line(turn, line, false)
    }

    fn speak_line(&self, turn: &Turn, line: &str, remember: bool) -> u64 {
        self.follow(turn);
        let mut unit = turn.open_unit();
        let id = unit.id();
        if unit.started() {
            let mut conversation = self.conversation();
            let entry = remember.then(|| {
                conversation.push(
                    crate::model::history::Role::Model,
                    vec![crate::model::history::Part::text(line)],
                )
            });
            conversation.speaking(id, entry);
        }
        unit.write(line);
        unit.close();
        id
    }

    /// Follows `session` from now on: its user's words and heard truth reach the conversation
    /// as they happen, and the connection to the provider is warmed.
    fn attach(&self, session: &Session) {
        self.listen_to(session);
        self.warm();
    }

    /// Puts this core on `session`'s listeners.
    fn listen_to(&self, session: &Session) {
        let inner: Arc<dyn Listener> = self.inner.clone();
        session.listen(Arc::downgrade(&inner));
        self.inner.attached.store(true, Ordering::Release);
    }

    /// A core made outside a brain factory follows the call of the first turn it serves, from
    /// that turn's user's words on.
    fn follow(&self, turn: &Turn) {
        if self.inner.attached.load(Ordering::Acquire) {
            return;
        }
        self.attach(turn.session());
        if let Some(text) = turn.user_text() {
            self.conversation().push_user(text);
        }
    }

    /// Opens a pooled connection to each provider of the layer (every layer of a chain) in the
    /// background, when there is a runtime to run it on.
    fn warm(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for layer in self.inner.layer.layers() {
            let layer = layer.clone();
            runtime.spawn(async move {
                http::warm(layer.base_url(), layer.timeouts().connect, layer.http()).await;
            });
        }
    }
}
