//! Entry points for the workspace's benchmarks (`cargo bench -p voqalize-tools --bench voice`): the
//! hot paths of a model-backed turn that are internal to the crate. Not a public API.

use crate::model::history::RequestSpec;
use crate::model::layer::DecodeLimits;
use crate::model::sse::{DEFAULT_MAX_EVENT_BYTES, SseParser};
use crate::model::{ModelError, ToolChoice};
use crate::tools::{Arguments, ToolSet};

use super::ModelLayer;
use super::conversation::Conversation;
use crate::model::history::{Call, Part, Role, ToolResult};

/// Why a bench step failed: the layer's or the parser's error (the model errors are not public
/// API, so the hook hands them over boxed).
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// A conversation of `turns` exchanges (user, model text and a call, its result, the model's
/// answer) ready to be turned into requests.
pub struct RequestBench {
    layer: ModelLayer,
    tools: ToolSet,
    conversation: Conversation,
}

impl RequestBench {
    /// `turns` exchanges of history over `layer`, declaring `tools`.
    pub fn new(layer: impl Into<ModelLayer>, tools: ToolSet, turns: usize) -> RequestBench {
        let mut conversation = Conversation::new(turns * 5 + 8, usize::MAX);
        for i in 0..turns {
            conversation.push_user(&format!("Please book a table for {i} people tonight."));
            let model = conversation.push(
                Role::Model,
                vec![
                    Part::text("Opening the booking form for you now."),
                    Part::Call {
                        call: Call {
                            id: Some(format!("call_{i}")),
                            name: "open_booking".into(),
                            arguments: Arguments::Raw(format!(
                                "{{\"city\":\"Paris\",\"party\":{i}}}"
                            )),
                        },
                        raw: serde_json::json!({"functionCall": {"id": format!("call_{i}"),
                            "name": "open_booking", "args": {"city": "Paris", "party": i}}}),
                    },
                ],
            );
            let ordinal = conversation.call_filed(model, std::time::Instant::now());
            conversation.answer(
                model,
                ordinal,
                ToolResult {
                    call_id: Some(format!("call_{i}")),
                    name: "open_booking".into(),
                    response: serde_json::json!({"result": "ok"}),
                },
            );
            // The model's answer once the tool ran: what ends a turn that called one.
            let answer = conversation.push(
                Role::Model,
                vec![Part::text(format!(
                    "Done: a table for {i} in Paris tonight, booking B{i}."
                ))],
            );
            conversation.response_closed(answer);
        }
        RequestBench {
            layer: layer.into(),
            tools,
            conversation,
        }
    }

    /// Builds one request as a turn's request is built, with the history's rendering kept from
    /// the previous build (only what is new rendered: here the entries of the current turn);
    /// returns the body's length in bytes.
    ///
    /// # Errors
    /// The layer refused the conversation.
    pub fn build(&self) -> Result<usize, BenchError> {
        self.build_with(true)
    }

    /// Builds one request rendering every entry of the history (a call's first request, or
    /// another layer's); returns the body's length in bytes.
    ///
    /// # Errors
    /// The layer refused the conversation.
    pub fn build_fresh(&self) -> Result<usize, BenchError> {
        self.build_with(false)
    }

    fn build_with(&self, kept: bool) -> Result<usize, BenchError> {
        // The path a turn's request takes (the history is the layer's own: borrowed).
        let history =
            crate::model::origin::for_layer(self.conversation.entries(), &**self.layer.layer());
        let spec = RequestSpec {
            instruction: Some("You are a helpful booking assistant. Be brief."),
            history: &history,
            note: None,
            tools: &self.tools,
            choice: &ToolChoice::Auto,
            rendered: kept.then(|| self.conversation.rendered()),
        };
        let request = self.layer.layer().build(&spec).map_err(Box::new)?;
        Ok(request.body.len())
    }

    /// Parses `sse` as one response stream and decodes it with this layer, going on past events
    /// the layer refuses (as a fuzzer wants); returns the number of chunks decoded (the work
    /// between the first byte and the first speech of a turn, and after).
    ///
    /// # Errors
    /// The SSE parser refused the bytes (an event over its size limit).
    pub fn decode(&self, sse: &[u8]) -> Result<usize, BenchError> {
        let mut parser = SseParser::new(DEFAULT_MAX_EVENT_BYTES);
        let mut decoder = self.layer.layer().decoder(DecodeLimits::UNBOUNDED);
        parser.push(sse);
        let mut chunks = 0;
        let boxed =
            |e: crate::model::sse::SseError| -> BenchError { Box::new(ModelError::from(e)) };
        while let Some(item) = parser.next_item().map_err(boxed)? {
            chunks += decoder.item(item).map_or(0, |c| c.len());
        }
        while let Some(item) = parser.finish().map_err(boxed)? {
            chunks += decoder.item(item).map_or(0, |c| c.len());
        }
        chunks += decoder.end().map_or(0, |c| c.len());
        Ok(chunks)
    }
}
