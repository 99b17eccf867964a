//! [`Step`]: one timed piece of a turn's work, reported as a `TurnStep` (docs/protocol.md §4.10).

use std::collections::BTreeMap;

/// One step of a turn's work to report with [`Session::report_step`](super::Session::report_step): a model request, a tool, a
/// database query... Sent as a `TurnStep` frame; Voqalize shows it in the call's trace and bills by
/// its counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) provider: String,
    pub(crate) duration_ms: u32,
    pub(crate) start_ms: Option<u32>,
    pub(crate) first_output_ms: Option<u32>,
    pub(crate) counts: BTreeMap<String, u64>,
}

impl Step {
    /// A step of `kind` (open vocabulary: `model`, `tool`, `database`, `http`, `mcp`, ...) named `name`.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Step {
            kind: kind.into(),
            name: name.into(),
            ..Step::default()
        }
    }

    /// Who served it (empty, the default, for the brain's own work).
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    /// How long it took, in ms.
    pub fn duration_ms(mut self, ms: u32) -> Self {
        self.duration_ms = ms;
        self
    }

    /// When it started, in ms after the turn's stimulus arrived. Unset, it is computed as
    /// `now − turn start − duration` (at least 0).
    pub fn start_ms(mut self, ms: u32) -> Self {
        self.start_ms = Some(ms);
        self
    }

    /// ms from the step's start to its first output. `0` is sent as 0, distinct from unset.
    pub fn first_output_ms(mut self, ms: u32) -> Self {
        self.first_output_ms = Some(ms);
        self
    }

    /// Adds a count such as `input_tokens`. Counts that were not measured should be left out, never
    /// sent as 0.
    pub fn count(mut self, key: impl Into<String>, value: u64) -> Self {
        self.counts.insert(key.into(), value);
        self
    }
}
