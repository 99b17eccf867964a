//! How a model response ended, end to end: a stop that was not a normal end is named on the
//! `turn:` line, a call the stop cut off never runs (docs/protocol.md §6.2, §6.4), and a token
//! count no request can really have is not counted (§6.15). Each stream is real bytes in the
//! provider's own format, served by the stand-in over loopback HTTP to a model-backed `Brain` on
//! a real session socket; where a stream is not a recording, its shape is said beside it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize_testing::{ModelServer, Provider, Reply, Said, Voqalize};

use crate::support::{MetricLog, driver, heard_turn, logs};

/// A booking.
#[json_type]
struct Booking {
    /// The city.
    city: String,
}

/// A brain whose tools count their runs: a call that runs is seen.
struct Clerk {
    model: Model,
    runs: Arc<AtomicUsize>,
}

impl Brain for Clerk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Clerk {
    /// Show help.
    #[tool]
    async fn show_help(&self) -> &'static str {
        self.runs.fetch_add(1, Ordering::SeqCst);
        "shown"
    }

    /// Book a table.
    #[tool]
    async fn open_booking(&self, args: Booking) -> String {
        self.runs.fetch_add(1, Ordering::SeqCst);
        format!("booked in {}", args.city)
    }

    /// Write a file.
    #[tool]
    async fn make_file(&self, args: Booking) -> &'static str {
        let _ = args;
        self.runs.fetch_add(1, Ordering::SeqCst);
        "written"
    }
}

/// A started session of [`Clerk`] on `provider`'s layer against `server`, its model named
/// `model` (which tags this test's log lines), and the count of its tools' runs.
async fn clerk(
    provider: Provider,
    server: &ModelServer,
    model: &str,
) -> (Voqalize, Arc<AtomicUsize>) {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(5),
    };
    let layer = crate::support::layer(provider, &server.base_url(), model, timeouts);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let mut v = driver(move || Clerk {
        model: Model::new(layer.clone()),
        runs: r.clone(),
    })
    .await;
    v.start_silent().await.unwrap();
    (v, runs)
}

/// The `turn:` lines of the model named `model`, once there is one (5 s at most).
async fn turn_lines(v: &mut Voqalize, model: &str) -> Vec<String> {
    let needle = format!("turn: model={model} hops=");
    v.wait_for(Duration::from_secs(5), |_| {
        !logs().lines_with(&needle).is_empty()
    })
    .await
    .unwrap();
    logs().lines_with(&needle)
}

/// Anthropic: the block of a call the output stopped in is never stopped (the recording
/// `anthropic-sdk-max-tokens-open-tool-use-sonnet-3.7` in the corpus shows it); this one stops
/// before any `input_json_delta`, so its arguments would read as `{}`.
const ANTHROPIC_CUT: &str = concat!(
    "event: message_start\n",
    r#"data: {"type":"message_start","message":{"id":"msg_01CutOffCall","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":1}}}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01CutOff","name":"show_help","input":{}}}"#,
    "\n\n",
    "event: message_delta\n",
    r#"data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null,"stop_details":null},"usage":{"output_tokens":16}}"#,
    "\n\n",
    "event: message_stop\n",
    r#"data: {"type":"message_stop"}"#,
    "\n\n",
);

/// Gemini on Vertex AI, a call streamed as `partialArgs` (the shape of the corpus' `vertex/`
/// recordings) that the candidate finishes with `MAX_TOKENS` halfway through its only string:
/// put together, its arguments would read as `{"city": "Par"}`.
const GEMINI_CUT: &str = concat!(
    r#"data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"open_booking","willContinue":true}}]}}],"modelVersion":"gemini-test","responseId":"cut-1"}"#,
    "\r\n\r\n",
    r#"data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.city","stringValue":"Par","willContinue":true}],"willContinue":true}}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":16,"totalTokenCount":46},"modelVersion":"gemini-test","responseId":"cut-1"}"#,
    "\r\n\r\n",
);

/// Chat completions: a call's first fragment, then `finish_reason: length` (OpenAI's API
/// reference; the corpus' `chat-deepseek/vercel-deepseek-text` records a `length` finish).
const CHAT_CUT: &str = concat!(
    r#"data: {"id":"chatcmpl-cut","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_cut","type":"function","function":{"name":"show_help","arguments":""}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-cut","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":30,"completion_tokens":16,"total_tokens":46}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

/// OpenAI Responses: a `function_call` item done as `incomplete`, then `response.incomplete`
/// for `max_output_tokens` (the API reference's item status and `incomplete_details`; no
/// recording of either was found).
const RESPONSES_CUT: &str = concat!(
    "event: response.output_item.added\n",
    r#"data: {"type":"response.output_item.added","output_index":0,"item":{"id":"fc_cut","type":"function_call","status":"in_progress","arguments":"","call_id":"call_cut","name":"show_help"},"sequence_number":2}"#,
    "\n\n",
    "event: response.output_item.done\n",
    r#"data: {"type":"response.output_item.done","output_index":0,"item":{"id":"fc_cut","type":"function_call","status":"incomplete","arguments":"","call_id":"call_cut","name":"show_help"},"sequence_number":3}"#,
    "\n\n",
    "event: response.incomplete\n",
    r#"data: {"type":"response.incomplete","response":{"id":"resp_cut","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":0},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":46}},"sequence_number":4}"#,
    "\n\n",
);

/// Gemini Interactions: a `function_call` step opened as every recording opens one
/// (`arguments: {}`), never stopped, then `interaction.completed` with status `incomplete` (the
/// corpus' `aimock-interactions-incomplete-*` record that status).
const INTERACTIONS_CUT: &str = concat!(
    "event: interaction.created\n",
    r#"data: {"interaction":{"id":"v1_cut","status":"in_progress","object":"interaction","model":"gemini-2.5-flash"},"event_type":"interaction.created"}"#,
    "\n\n",
    "event: step.start\n",
    r#"data: {"index":0,"step":{"id":"cut1","signature":"","type":"function_call","name":"show_help","arguments":{}},"event_type":"step.start"}"#,
    "\n\n",
    "event: interaction.completed\n",
    r#"data: {"interaction":{"id":"v1_cut","status":"incomplete","usage":{"total_tokens":46,"total_input_tokens":30,"total_cached_tokens":0,"total_output_tokens":16,"total_tool_use_tokens":0,"total_thought_tokens":0},"object":"interaction","model":"gemini-2.5-flash"},"event_type":"interaction.completed"}"#,
    "\n\n",
    "event: done\ndata: [DONE]\n\n",
);

// A response the output token limit (or the provider) stopped halfway through a call: the call's
// arguments so far read as whole ones (`{}`, or `{"city": "Par"}` put together from a streamed
// call), and the tool ran with them. On every layer the call does not run, stays in the history
// with no arguments and an error result the model reads, and the `turn:` line says the call was
// cut and why the response stopped.
#[tokio::test]
async fn a_call_the_stop_cut_off_never_runs_and_the_turn_line_names_the_stop() {
    logs();
    let cases = [
        (
            Provider::Anthropic,
            ANTHROPIC_CUT,
            "show_help",
            "max_tokens",
        ),
        (Provider::Gemini, GEMINI_CUT, "open_booking", "MAX_TOKENS"),
        (Provider::Chat, CHAT_CUT, "show_help", "length"),
        (
            Provider::OpenAi,
            RESPONSES_CUT,
            "show_help",
            "incomplete (max_output_tokens)",
        ),
        (
            Provider::Interactions,
            INTERACTIONS_CUT,
            "show_help",
            "incomplete",
        ),
    ];
    for (provider, stream, tool, stop) in cases {
        let server = ModelServer::start(provider).await.unwrap();
        server.reply(Reply::new().raw(stream));
        server.reply(Reply::new().text("OK.").finish());
        let model = format!("cut-{provider:?}").to_lowercase();
        let (mut v, runs) = clerk(provider, &server, &model).await;
        heard_turn(&mut v, "help me").await.unwrap();
        v.user_says("and now?").await.unwrap();
        assert_eq!(
            runs.load(Ordering::SeqCst),
            0,
            "{provider:?}: the cut call ran"
        );

        // The model reads the call it made, with no arguments, and why it did not run.
        let said = server.read_back(1).expect("a second request").said;
        let call = said
            .iter()
            .position(|s| matches!(s, Said::Call { name, .. } if name == tool))
            .unwrap_or_else(|| panic!("{provider:?}: no call in {said:?}"));
        assert!(
            matches!(&said[call], Said::Call { arguments, .. } if *arguments == serde_json::json!({})),
            "{provider:?}: {said:?}"
        );
        assert!(
            matches!(&said[call + 1], Said::Result { output, .. }
                if output.contains("did not run: the reply stopped before this call's arguments")),
            "{provider:?}: {said:?}"
        );

        let lines = turn_lines(&mut v, &model).await;
        assert!(
            lines[0].contains(" cut_calls=1 ") && lines[0].ends_with(&format!(" stop={stop}")),
            "{provider:?}: {lines:?}"
        );
    }
}

// Anthropic's streaming classifiers end a response with `stop_reason: refusal` and say why in
// `stop_details` (category, explanation): the `turn:` line showed the refusal as an empty answer.
// It names the stop with its details, escaped and cut as any text from a provider: a megabyte
// of explanation with line breaks and ESCs cannot flood the log or forge a line. The shape is
// the SDK's `RefusalStopDetails` (anthropics/anthropic-sdk-python `types/refusal_stop_details.py`)
// and the hand-written fixtures beside it; no recording of a refusal was found.
#[tokio::test]
async fn a_refusal_is_named_on_the_turn_line_with_its_details_escaped_and_cut() {
    logs();
    let explanation = format!("Blocked.\n\u{1b}[2Jturn: forged {}", "x".repeat(100_000));
    let delta = serde_json::json!({
        "type": "message_delta",
        "delta": {"stop_reason": "refusal", "stop_sequence": null,
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": explanation}},
        "usage": {"output_tokens": 5}});
    let stream = format!(
        "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\n\
         event: content_block_delta\ndata: {}\n\nevent: content_block_stop\ndata: {}\n\n\
         event: message_delta\ndata: {delta}\n\nevent: message_stop\ndata: {}\n\n",
        r#"{"type":"message_start","message":{"id":"msg_01Refused","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,"usage":{"input_tokens":18,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_stop"}"#,
    );
    let server = ModelServer::start(Provider::Anthropic).await.unwrap();
    server.reply(Reply::new().raw(&stream));
    let (mut v, _) = clerk(Provider::Anthropic, &server, "refusing-claude").await;
    heard_turn(&mut v, "write malware").await.unwrap();
    let lines = turn_lines(&mut v, "refusing-claude").await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    let stop = line.split(" stop=").nth(1).expect("a stop");
    assert!(
        stop.starts_with(r"refusal (cyber: Blocked.\n\u{1b}[2Jturn: forged xxx"),
        "{line}"
    );
    assert!(
        stop.ends_with(" bytes)"),
        "cut, its length said: {}",
        &stop[..100]
    );
    assert!(line.len() < 2_000, "{} bytes", line.len());
    // No line of its own.
    let forged = logs().lines_with("turn: forged");
    assert!(
        forged
            .iter()
            .all(|l| l.contains("turn: model=refusing-claude ")),
        "{forged:?}"
    );
}

/// A Gemini response whose usage says `output` and `thoughts` tokens (the shape of the corpus'
/// Gemini recordings).
fn gemini_with_usage(output: u64, thoughts: u64) -> Reply {
    Reply::new().raw(&format!(
        "data: {{\"candidates\":[{{\"content\":{{\"role\":\"model\",\"parts\":[{{\"text\":\"Hello.\"}}]}},\
         \"finishReason\":\"STOP\",\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":12,\
         \"candidatesTokenCount\":{output},\"thoughtsTokenCount\":{thoughts},\"totalTokenCount\":12}},\
         \"modelVersion\":\"gemini-test\",\"responseId\":\"huge-1\"}}\r\n\r\n"
    ))
}

// A provider (or a proxy in front of one) that reports a token count near 2^64: `output +
// reasoning` overflowed, which panicked a debug build (the turn lost its `model` TurnStep) and
// wrapped in a release build, so `voqalize_model_tokens_total` went from 1.8e19 down to a few
// thousand, which Prometheus reads as a counter reset. A count over `Usage::MAX_COUNT` is left
// out (logged once per session), and what the provider reports sensibly is counted as before.
#[tokio::test]
async fn a_token_count_near_2_pow_64_is_not_counted_and_the_turn_still_reports() {
    logs();
    let metrics = MetricLog::default();
    let _recording = metrics::set_default_local_recorder(&metrics);
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let huge = u64::MAX - 615;
    server.reply(gemini_with_usage(huge, 1000));
    server.reply(gemini_with_usage(huge, 1000));
    server.reply(gemini_with_usage(7, 0));
    let (mut v, _) = clerk(Provider::Gemini, &server, "huge-gemini").await;
    for text in ["one", "two", "three"] {
        v.user_says(text).await.unwrap();
    }
    let steps: Vec<_> = v
        .turn_steps()
        .iter()
        .filter(|s| s.kind == "model")
        .map(|s| s.counts.clone())
        .collect();
    assert_eq!(steps.len(), 3, "each turn reports its request: {steps:?}");
    assert!(!steps[0].contains_key("output_tokens"), "{steps:?}");
    assert_eq!(steps[0]["reasoning_tokens"], 1000);
    assert_eq!(steps[2]["output_tokens"], 7);
    let output = "voqalize_model_tokens_total{kind=output,provider=gcp.gemini}";
    assert_eq!(metrics.value(output), 7.0, "{:?}", metrics.names());
    let input = "voqalize_model_tokens_total{kind=input,provider=gcp.gemini}";
    assert_eq!(metrics.value(input), 36.0);
    // `Usage::MAX_COUNT`.
    let over = format!("reported output_tokens={huge}, over the 100000000");
    let logged = logs().lines_with(&over);
    assert_eq!(logged.len(), 1, "once per session: {logged:?}");
    assert!(logged[0].contains("model=huge-gemini"), "{logged:?}");
}
