//! STUB for the layers worktree: the real parser is written in another worktree and replaces this
//! file at merge. Only the item types, with their final shapes.

/// One thing a stream carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseItem {
    /// A dispatched event.
    Event(SseEvent),
    /// A bare JSON body where an event was expected (Gemini ends some 200 streams with a bare
    /// `{"error": ..}` object).
    Bare(String),
}

/// A Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// `event:` (OpenAI Responses names every event; Gemini and chat send none).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n` (`[DONE]` included as is).
    pub data: String,
    /// `id:`.
    pub id: Option<String>,
}
