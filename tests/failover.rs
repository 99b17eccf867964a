//! A fallback chain over a real session socket, against stand-in providers of different formats:
//! an outage of the first layer (a refused connection, a 503, a 529 with `Retry-After`, an error
//! event before any text, a stalled first byte) is answered by the second within the turn; an
//! error after the first words is not asked again; a breaker shared by every call skips a layer
//! the process knows is down and probes it once per cooling period; a hedged request takes the
//! first words and cancels the other; a recorded switch replays the same.

use std::time::{Duration, Instant};

use voqalize::model::Timeouts;
use voqalize::prelude::*;
use voqalize::voice::{Breaker, Fallback, FallbackError, ModelLayer};
use voqalize::wire::TurnStep;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::provider_crossing::check_anthropic;
use crate::request_schemas::{check_gemini, gemini_request};
use crate::support::{MetricLog, driver, layer, logs, refusing};

/// A desk that hands every turn to its model.
pub(crate) struct Desk {
    pub(crate) model: Model,
}

impl Brain for Desk {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Desk {
    /// Look up the caller's booking.
    #[tool]
    #[needs_result_now]
    async fn find_booking(&self) -> &'static str {
        "booking 4411"
    }
}

pub(crate) fn timeouts(first_byte: Duration) -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte,
        gap: Duration::from_secs(10),
    }
}

/// A chain of two stand-ins: `first` (its provider, base URL, model and first-byte timeout),
/// then `second` (its provider, base URL and model; 5 s to its first byte).
pub(crate) fn two(
    first: (Provider, &str, &str, Duration),
    second: (Provider, &str, &str),
) -> Fallback {
    let (provider, base, model, first_byte) = first;
    Fallback::new(layer(provider, base, model, timeouts(first_byte))).then(layer(
        second.0,
        second.1,
        second.2,
        timeouts(Duration::from_secs(5)),
    ))
}

/// A desk over `layers`, its fallback line set (it must never be heard when a layer answers).
pub(crate) fn desks(layers: ModelLayer) -> impl Fn() -> Desk + Send + Sync + 'static {
    move || Desk {
        model: Model::new(layers.clone())
            .instruction("You answer the Harbour Hotel's phone.")
            .fallback_line("Sorry, we are having trouble."),
    }
}

/// The steps of turn `turn`, as `kind name provider` and their counts' keys.
pub(crate) fn steps(v: &Voqalize, turn: u64) -> Vec<String> {
    v.turn_steps()
        .iter()
        .filter(|s| s.turn_id == turn)
        .map(|s: &TurnStep| {
            let counts: Vec<&str> = s
                .counts
                .keys()
                .map(String::as_str)
                .filter(|k| !k.ends_with("tokens"))
                .collect();
            format!("{} {} {} {}", s.kind, s.name, s.provider, counts.join(","))
                .trim_end()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn an_outage_of_the_first_layer_is_answered_by_the_second_within_the_turn() {
    // (case, what the first layer does, the reason the fallback step names)
    let cases: [(&str, Option<Reply>, &str); 5] = [
        ("refused", None, "http"),
        (
            "503",
            Some(Reply::error_status(503, "overloaded")),
            "status_5xx",
        ),
        (
            "529",
            Some(Reply::error_status(529, "overloaded").header("retry-after", "30")),
            "status_5xx",
        ),
        (
            "error-event",
            Some(Reply::new().thought("Thinking.").error("internal error")),
            "stream",
        ),
        ("stall", Some(Reply::new().hang()), "timeout"),
    ];
    logs();
    let gemini = gemini_request();
    for (case, first, reason) in cases {
        let down = ModelServer::start(Provider::Gemini).await.unwrap();
        let up = ModelServer::start(Provider::Anthropic).await.unwrap();
        let base = match &first {
            None => refusing().await,
            Some(_) => down.base_url(),
        };
        if let Some(reply) = first {
            down.reply(reply);
        }
        up.reply(Reply::new().text("Your room is ready.").finish());
        let model = format!("gemini-{case}");
        let stall = Duration::from_millis(if case == "stall" { 300 } else { 5000 });
        let layers = two(
            (Provider::Gemini, &base, &model, stall),
            (Provider::Anthropic, &up.base_url(), "claude-test"),
        )
        .build()
        .unwrap();
        let mut v = driver(desks(layers)).await;
        v.start_silent().await.unwrap();
        let turn = v.user_says("Is my room ready?").await.unwrap();
        assert_eq!(turn.text(), "Your room is ready.", "{case}");
        let sent = usize::from(case != "refused");
        assert_eq!(down.requests().len(), sent, "{case}: no retry on the first");
        assert_eq!(up.requests().len(), 1, "{case}");
        // Each layer was sent the turn in its own provider's request schema.
        for request in down.requests() {
            check_gemini(&gemini, &request.body, &format!("{case}: the first layer"));
        }
        check_anthropic(&up.requests()[0].body, &format!("{case}: the second layer"));
        assert_eq!(
            steps(&v, turn.turn_id),
            [
                format!("model {model} google"),
                format!("fallback {model} google {reason}"),
                "model claude-test anthropic".to_owned(),
            ],
            "{case}"
        );
        let line = logs().lines_with(&format!("fallback={model}:{reason}"));
        assert!(
            line.iter().any(|l| l.contains("turn: model=claude-test")),
            "{case}: {line:?}"
        );
        if case == "529" {
            // The provider asked for 30 s: the next turn asks the second layer alone.
            up.reply(Reply::new().text("Breakfast is at seven.").finish());
            let turn = v.user_says("When is breakfast?").await.unwrap();
            assert_eq!(turn.text(), "Breakfast is at seven.");
            assert_eq!(down.requests().len(), 1, "skipped while it asked to be");
            assert_eq!(
                steps(&v, turn.turn_id),
                [
                    format!("fallback {model} google breaker_open"),
                    "model claude-test anthropic".to_owned(),
                ]
            );
        }
    }
}

#[tokio::test]
async fn an_error_after_the_first_words_is_not_asked_of_the_next_layer() {
    let down = ModelServer::start(Provider::OpenAi).await.unwrap();
    let up = ModelServer::start(Provider::Chat).await.unwrap();
    down.reply(Reply::new().text("Your room").error("server had an error"));
    let layers = two(
        (
            Provider::OpenAi,
            &down.base_url(),
            "gpt-after-words",
            Duration::from_secs(5),
        ),
        (Provider::Chat, &up.base_url(), "chat-after-words"),
    )
    .build()
    .unwrap();
    let mut v = driver(desks(layers)).await;
    v.start_silent().await.unwrap();
    let turn = v.user_says("Is my room ready?").await.unwrap();
    assert_eq!(
        turn.text(),
        "Your room",
        "what was said stays, nothing more"
    );
    assert!(up.requests().is_empty(), "the second layer was never asked");
}

#[tokio::test]
async fn a_tool_follow_up_asks_the_layer_that_answered_first() {
    let down = ModelServer::start(Provider::Gemini).await.unwrap();
    let up = ModelServer::start(Provider::OpenAi).await.unwrap();
    down.answer_with(|_| Reply::error_status(500, "internal"));
    up.reply(
        Reply::new()
            .call("find_booking", serde_json::json!({}))
            .finish(),
    );
    up.reply(Reply::new().text("Booking 4411 is confirmed.").finish());
    let layers = two(
        (
            Provider::Gemini,
            &down.base_url(),
            "gemini-sticky",
            Duration::from_secs(5),
        ),
        (Provider::OpenAi, &up.base_url(), "gpt-sticky"),
    )
    .build()
    .unwrap();
    let mut v = driver(move || Desk {
        model: Model::new(layers.clone()),
    })
    .await;
    v.start_silent().await.unwrap();
    let turn = crate::support::says(&mut v, "Find my booking", 1).await;
    assert_eq!(turn.text(), "Booking 4411 is confirmed.");
    assert_eq!(
        down.requests().len(),
        1,
        "the follow-up went where the turn was answered"
    );
    assert_eq!(up.requests().len(), 2);
}

/// `n` calls at once, each saying one thing; gives what each heard.
async fn calls_at_once(layers: &ModelLayer, n: usize) -> Vec<String> {
    let calls = (0..n).map(|_| {
        let layers = layers.clone();
        async move {
            let mut v = driver(desks(layers)).await;
            v.start_silent().await.unwrap();
            let heard = v.user_says("Hello?").await.unwrap().text();
            v.end().await.unwrap();
            heard
        }
    });
    futures_util::future::join_all(calls).await
}

#[tokio::test]
async fn a_known_outage_is_skipped_by_every_call_and_probed_once_per_cooling_period() {
    let metrics = MetricLog::default();
    let _recording = metrics::set_default_local_recorder(&metrics);
    let down = ModelServer::start(Provider::Gemini).await.unwrap();
    let up = ModelServer::start(Provider::Chat).await.unwrap();
    down.answer_with(|_| Reply::error_status(503, "overloaded"));
    up.answer_with(|_| Reply::new().text("Hello from the second.").finish());
    let cooling = Duration::from_secs(2);
    let layers = two(
        (
            Provider::Gemini,
            &down.base_url(),
            "gemini-outage",
            Duration::from_secs(5),
        ),
        (Provider::Chat, &up.base_url(), "chat-outage"),
    )
    .breaker(Breaker::new().failures(3).cooling(cooling))
    .build()
    .unwrap();
    let state = "voqalize_model_breaker_state{model=gemini-outage,provider=google}";

    // Three failures in a row open the breaker.
    let heard = calls_at_once(&layers, 1).await;
    assert_eq!(heard, ["Hello from the second."]);
    let mut v = driver(desks(layers.clone())).await;
    v.start_silent().await.unwrap();
    for _ in 0..2 {
        let turn = v.user_says("Hello?").await.unwrap();
        assert_eq!(turn.text(), "Hello from the second.");
    }
    assert_eq!(down.requests().len(), 3);
    assert_eq!(metrics.value(state), 2.0, "open");

    // 200 calls during the outage: none waits on the first layer; at most one probe per
    // cooling period reaches it.
    let began = Instant::now();
    let heard = calls_at_once(&layers, 200).await;
    let periods = began.elapsed().as_secs_f64() / cooling.as_secs_f64();
    assert!(
        heard.iter().all(|h| h == "Hello from the second."),
        "{heard:?}"
    );
    let probes = down.requests().len() - 3;
    assert!(
        (probes as f64) <= periods.ceil() + 1.0,
        "{probes} probes in {periods:.1} cooling periods"
    );

    // The provider is back: once the cooling ends, one call's request probes it and closes the
    // breaker; the calls after it are answered by the first layer again.
    down.answer_with(|_| Reply::new().text("Hello from the first.").finish());
    let reopened = down.requests().len();
    let mut heard = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while heard != ["Hello from the first."] && Instant::now() < deadline {
        tokio::time::sleep(cooling / 4).await;
        heard = calls_at_once(&layers, 1).await;
    }
    assert_eq!(heard, ["Hello from the first."]);
    assert_eq!(down.requests().len(), reopened + 1, "one probe");
    assert_eq!(metrics.value(state), 0.0, "closed");
    assert_eq!(
        calls_at_once(&layers, 3).await,
        ["Hello from the first."; 3]
    );
    let moved =
        "voqalize_model_fallbacks_total{from=gemini-outage,reason=breaker_open,to=chat-outage}";
    assert!(metrics.value(moved) >= 190.0, "{}", metrics.value(moved));
}

#[tokio::test]
async fn a_probe_a_barge_in_drops_is_given_back_for_the_next_request() {
    let down = ModelServer::start(Provider::Gemini).await.unwrap();
    let up = ModelServer::start(Provider::OpenAi).await.unwrap();
    down.answer_with(|_| Reply::error_status(503, "overloaded"));
    up.answer_with(|_| Reply::new().text("From the second.").finish());
    let cooling = Duration::from_millis(300);
    let layers = two(
        (
            Provider::Gemini,
            &down.base_url(),
            "gemini-probe-dropped",
            Duration::from_secs(20),
        ),
        (Provider::OpenAi, &up.base_url(), "gpt-probe-dropped"),
    )
    .breaker(Breaker::new().failures(1).cooling(cooling))
    .build()
    .unwrap();
    let mut v = driver(desks(layers)).await;
    v.start_silent().await.unwrap();
    assert_eq!(v.user_says("One").await.unwrap().text(), "From the second.");
    assert_eq!(down.requests().len(), 1, "one failure opened the breaker");

    // Once the cooling ends, a request probes the first layer, which stalls; the caller cuts in
    // and the turn is dropped with the probe in flight.
    down.answer_with(|_| Reply::new().hang());
    tokio::time::sleep(cooling * 2).await;
    let turn = v.send_user_message("Two").await.unwrap();
    assert!(down.wait_requests(2).await, "the probe went out");
    v.send(voqalize::wire::Frame::Interruption { through_turn: turn })
        .await
        .unwrap();
    assert!(down.wait_hung_up(1).await, "the probe was dropped");

    // The probe was given back: the next request probes again, and the provider is back.
    down.answer_with(|_| Reply::new().text("From the first.").finish());
    assert_eq!(
        v.user_says("Three").await.unwrap().text(),
        "From the first."
    );
    assert_eq!(down.requests().len(), 3);
}

#[tokio::test]
async fn a_hedged_request_takes_the_first_words_and_cancels_the_other() {
    let metrics = MetricLog::default();
    let _recording = metrics::set_default_local_recorder(&metrics);
    let slow = ModelServer::start(Provider::OpenAi).await.unwrap();
    let fast = ModelServer::start(Provider::Anthropic).await.unwrap();
    let layers = Fallback::new(layer(
        Provider::OpenAi,
        &slow.base_url(),
        "gpt-hedged",
        timeouts(Duration::from_secs(20)),
    ))
    .then(layer(
        Provider::Anthropic,
        &fast.base_url(),
        "claude-hedged",
        timeouts(Duration::from_secs(20)),
    ))
    .hedge_after(Duration::from_millis(100))
    .build()
    .unwrap();
    let mut v = driver(desks(layers)).await;
    v.start_silent().await.unwrap();

    // The first layer answers within the threshold: the second is never asked.
    slow.reply(Reply::new().text("Right away.").finish());
    let turn = v.user_says("A taxi, please").await.unwrap();
    assert_eq!(turn.text(), "Right away.");
    assert!(fast.requests().is_empty());

    // The first layer sends its head and then nothing: the hedge answers, and the first
    // request's connection is closed.
    slow.reply(Reply::new().hang());
    fast.reply(Reply::new().text("Your taxi is booked.").finish());
    let turn = v.user_says("And a taxi tomorrow").await.unwrap();
    assert_eq!(turn.text(), "Your taxi is booked.");
    assert!(slow.wait_hung_up(1).await, "the loser was cancelled");
    assert_eq!(fast.requests().len(), 1);
    assert_eq!(
        metrics.value("voqalize_model_hedges_total{won=second}"),
        1.0,
        "{:?}",
        metrics.names()
    );
    assert_eq!(
        metrics.value("voqalize_model_requests_total{outcome=hedged_out,provider=openai}"),
        1.0
    );
}

#[tokio::test]
async fn a_recorded_switch_replays_the_same() {
    use voqalize_testing::Replay;
    let down = ModelServer::start(Provider::Gemini).await.unwrap();
    let up = ModelServer::start(Provider::OpenAi).await.unwrap();
    down.reply(Reply::error_status(503, "overloaded"));
    up.reply(Reply::new().text("Checkout is at noon.").finish());
    let chain = |first: &str, second: &str| {
        two(
            (
                Provider::Gemini,
                first,
                "gemini-replayed",
                Duration::from_secs(5),
            ),
            (Provider::OpenAi, second, "gpt-replayed"),
        )
        .build()
        .unwrap()
    };
    let recording =
        crate::replay::recorded(desks(chain(&down.base_url(), &up.base_url())), async |v| {
            assert_eq!(
                v.user_says("When is checkout?").await.unwrap().text(),
                "Checkout is at noon."
            );
        })
        .await;
    assert_eq!(
        recording.exchanges.len(),
        2,
        "the failed request is recorded too"
    );
    let mut replay = Replay::start(recording).await.unwrap();
    let base = replay.base_url();
    let same = replay.run(desks(chain(&base, &base))).await.unwrap();
    assert!(same.is_same(), "{same}");
}

#[test]
fn a_chain_that_cannot_work_is_refused_at_build() {
    let gemini = || {
        layer(
            Provider::Gemini,
            "http://127.0.0.1:9",
            "gemini-build",
            Timeouts::default(),
        )
    };
    let none: [ModelLayer; 0] = [];
    assert_eq!(
        Fallback::of(none).build().unwrap_err(),
        FallbackError::Empty
    );
    assert_eq!(
        Fallback::new(gemini())
            .then(gemini())
            .breaker(Breaker::new().cooling(Duration::ZERO))
            .build()
            .unwrap_err(),
        FallbackError::ZeroCooling
    );
    assert_eq!(
        Fallback::new(gemini())
            .breaker(Breaker::new().failures(0))
            .build()
            .unwrap_err(),
        FallbackError::ZeroFailures
    );
    assert_eq!(
        Fallback::new(gemini())
            .hedge_after(Duration::from_millis(100))
            .build()
            .unwrap_err(),
        FallbackError::NothingToHedgeOn
    );
    let nine = Fallback::of((0..9).map(|_| gemini())).build().unwrap_err();
    assert_eq!(nine, FallbackError::TooLong { given: 9, max: 8 });
    assert_eq!(
        nine.to_string(),
        "a fallback chain holds at most 8 layers, not 9"
    );
}
