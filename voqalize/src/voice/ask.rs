//! One model request outside a turn: an instruction and a few messages, no tools, the reply's text
//! read within a byte bound, and the tokens it used under their TurnStep names. The handoff
//! summary asks with it; so do the testing kit's simulated caller and judge (`__kit::ask`).

use std::collections::BTreeMap;

use crate::model::ToolChoice;
use crate::model::history::{Entry, Part, RequestSpec, Role};
use crate::model::http;
use crate::model::layer::{DecodeLimits, Layer, Usage};
use crate::tools::ToolSet;
use crate::voice::ModelLayer;

/// What one request answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// The reply's text, read until it reached the request's byte bound: the text part that
    /// reached it is kept whole, so it may pass the bound by that one part (a part is itself
    /// within what the response may keep). Clip it where an exact bound matters.
    pub text: String,
    /// The tokens the request used, under the names TurnSteps give them (`input_tokens`,
    /// `cached_input_tokens`, `cache_write_tokens`, `output_tokens`, `reasoning_tokens`): only
    /// those the provider reported (a count past `Usage::MAX_COUNT` is left out, as the voice
    /// core does). Empty when the reply was cut at the byte bound before its usage came.
    pub counts: BTreeMap<String, u64>,
}

/// One request: `instruction`, then `messages` in order (each a user's or the model's text; a
/// `Results` role is refused), no tools; its text read within `max_bytes` (a response past four
/// times that, or 16 KiB, is cut; a call in it is ignored). No timeout of its own beyond the
/// layer's [`Timeouts`](crate::model::Timeouts): the caller bounds the whole request in time.
///
/// # Errors
/// The request could not be built, sent or read, or the provider answered an error: what failed,
/// with its causes, unclipped (a log line shows it through `logline::outside`).
pub(crate) async fn ask(
    layer: &dyn Layer,
    instruction: &str,
    messages: &[(Role, String)],
    max_bytes: usize,
) -> Result<Asked, String> {
    let mut history = Vec::with_capacity(messages.len());
    for (id, (role, text)) in (1..).zip(messages) {
        if *role == Role::Results {
            return Err("a message is the user's or the model's text, not call results".to_owned());
        }
        history.push(Entry::new(id, *role, vec![Part::text(text.clone())]));
    }
    let tools = ToolSet::empty();
    // Text of no origin: borrowed as it is, the one path every request takes.
    let history = crate::model::origin::for_layer(&history, layer);
    let spec = RequestSpec {
        instruction: Some(instruction),
        history: &history,
        note: None,
        tools: &tools,
        choice: &ToolChoice::None,
        rendered: None,
    };
    let request = layer.build(&spec).map_err(|e| e.to_string())?;
    let response_bytes = max_bytes.saturating_mul(4).max(16 * 1024);
    let mut stream = http::open(&request, layer.timeouts(), response_bytes, layer.http())
        .await
        .map_err(|e| crate::logline::chain(&e))?;
    let mut decoder = layer.decoder(DecodeLimits::new(0, 0, 64, response_bytes));
    let mut text = String::new();
    let mut usage: Option<Usage> = None;
    loop {
        let (chunks, ended) = match stream.next().await {
            Some(Ok(item)) => (decoder.item(item).map_err(|e| e.to_string())?, false),
            Some(Err(e)) => return Err(crate::logline::chain(&e)),
            None => (decoder.end().map_err(|e| e.to_string())?, true),
        };
        for chunk in chunks {
            // As a turn's request reports it: a later usage replaces an earlier one.
            if let Some(u) = chunk.usage {
                usage = Some(u.bounded().0);
            }
            for part in chunk.parts {
                if let Part::Text { text: t, .. } = part
                    && text.len() < max_bytes
                {
                    text.push_str(&t);
                }
            }
        }
        if ended || decoder.done() || text.len() >= max_bytes {
            let counts = usage
                .unwrap_or_default()
                .counts()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            return Ok(Asked { text, counts });
        }
    }
}

/// Why a summary request gave no summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsummarised {
    /// The request could not be built, sent or read, or the provider answered an error
    /// (unclipped: a log line shows it through `logline::outside`).
    Failed(String),
    /// It took longer than its timeout.
    Timeout(std::time::Duration),
    /// It said nothing: no text, or only a function call (which is neither run nor kept).
    Empty,
}

impl Unsummarised {
    /// What went wrong, for the one log line.
    pub(crate) fn why(&self) -> String {
        match self {
            Unsummarised::Failed(why) => why.clone(),
            Unsummarised::Timeout(t) => format!("it took over {t:?}"),
            Unsummarised::Empty => "it said nothing".to_owned(),
        }
    }

    /// The outcome's label in `voqalize_history_summaries_total`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Unsummarised::Failed(_) => "failed",
            Unsummarised::Timeout(_) => "timeout",
            Unsummarised::Empty => "empty",
        }
    }
}

/// A summary: one [`ask`] of `layers` within `timeout`, its text trimmed and cut to `max_bytes`
/// (marked with its length when cut). Over a fallback chain, a layer whose breaker is open is
/// skipped (a half-open one too: its probe is left to a turn) and a failed request moves on to
/// the next layer, within the one timeout; a summary request's verdict leaves the breakers as
/// they were (it is not a caller's turn). The handoff summary and the long-call summary both
/// ask with it.
///
/// # Errors
/// [`Unsummarised`]: every layer failed (the last one's error), the whole took longer than
/// `timeout`, or the answer said nothing.
pub(crate) async fn summarise(
    layers: &ModelLayer,
    instruction: &str,
    messages: &[(Role, String)],
    max_bytes: usize,
    timeout: std::time::Duration,
) -> Result<String, Unsummarised> {
    let asked = async {
        let mut why = Unsummarised::Failed("every layer's breaker is open".to_owned());
        for (i, layer) in layers.layers().enumerate() {
            // A layer cooling, or half-open (its one probe is a turn's to make: a summary that
            // took it would have every turn skip the layer meanwhile), is not asked. The ticket
            // goes back untold at once.
            if let Some(chain) = layers.fallback()
                && chain.admit(i).is_none_or(|ticket| ticket.probe())
            {
                continue;
            }
            match ask(&**layer, instruction, messages, max_bytes).await {
                Ok(asked) if !asked.text.trim().is_empty() => {
                    return Ok(crate::tools::shortened_to(asked.text.trim(), max_bytes));
                }
                // An answer of no text is the model's, not an outage: no other layer is asked.
                Ok(_) => return Err(Unsummarised::Empty),
                Err(failed) => why = Unsummarised::Failed(failed),
            }
        }
        Err(why)
    };
    match tokio::time::timeout(timeout, asked).await {
        Ok(made) => made,
        Err(_) => Err(Unsummarised::Timeout(timeout)),
    }
}
