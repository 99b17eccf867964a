//! [`Step`]: one timed piece of a turn's work, reported as a `TurnStep` (docs/protocol.md §4.10).

use std::collections::BTreeMap;

use crate::wire::clip;

/// One step of a turn's work to report with [`Session::report_step`](super::Session::report_step): a model request, a tool, a
/// database query... Sent as a `TurnStep` frame; Voqalize shows it in the call's trace and bills by
/// its counts.
///
/// Its strings are often chosen by a model (a tool name it invented), so a step is bounded as it is
/// built: `kind`, `name` and `provider` keep at most [`Step::MAX_TEXT_BYTES`] bytes, a count's key
/// at most [`Step::MAX_KEY_BYTES`], and a step at most [`Step::MAX_COUNTS`] counts; longer strings
/// are cut at a character boundary. A `TurnStep` is therefore a few kilobytes at most, whatever the
/// model named (docs/protocol.md §4.10).
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
    /// The most bytes of `kind`, `name` and `provider` a step keeps (256); the rest is cut off at a
    /// character boundary.
    pub const MAX_TEXT_BYTES: usize = 256;

    /// The most bytes of a count's key a step keeps (64); the rest is cut off at a character
    /// boundary. Two keys that are equal once cut are one count: the later value wins.
    pub const MAX_KEY_BYTES: usize = 64;

    /// The most counts a step carries (32): a count with a new key past them is left out.
    pub const MAX_COUNTS: usize = 32;

    /// A step of `kind` (open vocabulary: `model`, `tool`, `database`, `http`, `mcp`, ...) named
    /// `name`, each cut to [`Step::MAX_TEXT_BYTES`].
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Step {
            kind: bounded(kind.into(), Self::MAX_TEXT_BYTES),
            name: bounded(name.into(), Self::MAX_TEXT_BYTES),
            ..Step::default()
        }
    }

    /// Who served it (empty, the default, for the brain's own work), cut to
    /// [`Step::MAX_TEXT_BYTES`].
    #[must_use]
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = bounded(provider.into(), Self::MAX_TEXT_BYTES);
        self
    }

    /// How long it took, in ms.
    #[must_use]
    pub fn duration_ms(mut self, ms: u32) -> Self {
        self.duration_ms = ms;
        self
    }

    /// When it started, in ms after the turn's stimulus arrived. Unset, it is computed as
    /// `now − turn start − duration` (at least 0).
    #[must_use]
    pub fn start_ms(mut self, ms: u32) -> Self {
        self.start_ms = Some(ms);
        self
    }

    /// ms from the step's start to its first output. `0` is sent as 0, distinct from unset.
    #[must_use]
    pub fn first_output_ms(mut self, ms: u32) -> Self {
        self.first_output_ms = Some(ms);
        self
    }

    /// Adds a count such as `input_tokens`, its key cut to [`Step::MAX_KEY_BYTES`]. Counts that
    /// were not measured should be left out, never sent as 0. Past [`Step::MAX_COUNTS`] keys, a
    /// count with a new key is left out.
    #[must_use]
    pub fn count(mut self, key: impl Into<String>, value: u64) -> Self {
        let key = bounded(key.into(), Self::MAX_KEY_BYTES);
        if self.counts.len() < Self::MAX_COUNTS || self.counts.contains_key(&key) {
            self.counts.insert(key, value);
        }
        self
    }
}

fn bounded(mut text: String, max_bytes: usize) -> String {
    clip(&mut text, max_bytes);
    text
}
