//! A fallback chain against hostile providers, over a real session socket: a `Retry-After` of
//! any shape (negative, a date, garbage, past what a `Duration` holds), breakers set to cool for
//! ever, every layer's breaker open at once, and hedged requests that both fail, that the first
//! wins after the hedge went out, and that a barge-in drops; a layer that streams only
//! keep-alives is left at its first-byte timeout; layers whose timers are set to no limit.

use std::time::Duration;

use voqalize::voice::{Breaker, Fallback};
use voqalize_testing::{ModelServer, Provider, Reply};

use crate::failover::{desks, steps, timeouts, two};
use crate::support::{MetricLog, driver, layer};

/// What every desk says when no layer answered.
const FALLBACK_LINE: &str = "Sorry, we are having trouble.";

/// A chain of two chat stand-ins, the first at `down` named `model`, the second answering
/// "Hello." to every request.
async fn over_down(down: &ModelServer, model: &str) -> (Fallback, ModelServer) {
    let up = ModelServer::start(Provider::Chat).await.expect("a port");
    up.answer_with(|_| Reply::new().text("Hello.").finish());
    let chain = two(
        (
            Provider::Chat,
            &down.base_url(),
            model,
            Duration::from_secs(5),
        ),
        (Provider::Chat, &up.base_url(), &format!("{model}-up")),
    );
    (chain, up)
}

#[tokio::test]
async fn a_retry_after_of_any_shape_never_panics_and_one_past_a_duration_is_capped() {
    // (the header, whether it keeps the layer skipped on the next turn)
    let cases = [
        ("-5", false),
        ("soon", false),
        ("Wed, 21 Oct 2015 07:28:00 GMT", false),
        ("NaN", false),
        ("inf", false),
        ("", false),
        ("3600", true),
        // Past what a `Duration` holds: still "a long time", capped as any other.
        ("99999999999999999999", true),
        ("184467440737095516160000", true),
    ];
    let cap = Duration::from_millis(400);
    for (i, (value, skips)) in cases.into_iter().enumerate() {
        let down = ModelServer::start(Provider::Chat).await.expect("a port");
        down.answer_with(move |_| {
            Reply::error_status(429, "slow down").header("retry-after", value)
        });
        let model = format!("chat-retry-after-{i}");
        let (chain, _up) = over_down(&down, &model).await;
        let layers = chain.max_retry_after(cap).build().expect("a chain");
        let mut v = driver(desks(layers)).await;
        v.start_silent().await.expect("a session");
        for turn in 1..=2 {
            let heard = v.user_says("Hello?").await.expect("a turn").text();
            assert_eq!(heard, "Hello.", "{value:?}: turn {turn}");
        }
        let asked = if skips { 1 } else { 2 };
        assert_eq!(down.requests().len(), asked, "{value:?}");
        if skips {
            // The cap passed: one request probes the layer again.
            tokio::time::sleep(cap + Duration::from_millis(100)).await;
            v.user_says("Hello?").await.expect("a turn");
            assert_eq!(down.requests().len(), 2, "{value:?}: probed after the cap");
        }
        v.end().await.expect("an end");
    }
}

/// What a case sets on its chain.
type Setup = fn(Fallback) -> Fallback;

#[tokio::test]
async fn a_breaker_set_to_cool_for_ever_opens_and_stays_open() {
    // A breaker that never probes again, and a chain that takes any `Retry-After` at its word.
    let cases: [(&str, Setup, Option<&str>); 2] = [
        (
            "chat-cools-for-ever",
            |f| f.breaker(Breaker::new().failures(1).cooling(Duration::MAX)),
            None,
        ),
        (
            "chat-retry-after-uncapped",
            |f| f.max_retry_after(Duration::MAX),
            Some("9999999999999999999"),
        ),
    ];
    for (model, setup, retry_after) in cases {
        let down = ModelServer::start(Provider::Chat).await.expect("a port");
        down.answer_with(move |_| {
            let reply = Reply::error_status(503, "overloaded");
            match retry_after {
                Some(after) => reply.header("retry-after", after),
                None => reply,
            }
        });
        let (chain, _up) = over_down(&down, model).await;
        let layers = setup(chain).build().expect("a chain");
        let mut v = driver(desks(layers)).await;
        v.start_silent().await.expect("a session");
        for turn in 1..=3 {
            let heard = v.user_says("Hello?").await.expect("a turn").text();
            assert_eq!(heard, "Hello.", "{model}: turn {turn}");
        }
        assert_eq!(down.requests().len(), 1, "{model}: skipped after it failed");
        v.end().await.expect("an end");
    }
}

#[tokio::test]
async fn when_every_breaker_is_open_the_turn_fails_at_once_with_the_fallback_line() {
    let first = ModelServer::start(Provider::Gemini).await.expect("a port");
    let last = ModelServer::start(Provider::OpenAi).await.expect("a port");
    first.answer_with(|_| Reply::error_status(503, "overloaded"));
    last.answer_with(|_| Reply::error_status(500, "internal"));
    let layers = two(
        (
            Provider::Gemini,
            &first.base_url(),
            "gemini-all-open",
            Duration::from_secs(5),
        ),
        (Provider::OpenAi, &last.base_url(), "gpt-all-open"),
    )
    .breaker(Breaker::new().failures(1).cooling(Duration::from_secs(600)))
    .build()
    .expect("a chain");
    let mut v = driver(desks(layers)).await;
    v.start_silent().await.expect("a session");
    let turn = v.user_says("Hello?").await.expect("a turn");
    assert_eq!(turn.text(), FALLBACK_LINE);
    let sent = (first.requests().len(), last.requests().len());
    assert_eq!(sent.0, 1);
    assert!(sent.1 >= 1);

    // Both breakers are open: nothing is sent, the line is said, each skip is reported.
    let turn = v.user_says("Anyone there?").await.expect("a turn");
    assert_eq!(turn.text(), FALLBACK_LINE);
    assert_eq!((first.requests().len(), last.requests().len()), sent);
    assert_eq!(
        steps(&v, turn.turn_id),
        [
            "fallback gemini-all-open google breaker_open",
            "fallback gpt-all-open openai breaker_open",
        ]
    );
}

/// A chain of `first` (OpenAI) and `second` (Anthropic) stand-ins, hedged after 50 ms.
fn hedged(first: &ModelServer, second: &ModelServer, name: &str) -> voqalize::voice::ModelLayer {
    let long = timeouts(Duration::from_secs(20));
    Fallback::new(layer(
        Provider::OpenAi,
        &first.base_url(),
        &format!("gpt-{name}"),
        long,
    ))
    .then(layer(
        Provider::Anthropic,
        &second.base_url(),
        &format!("claude-{name}"),
        long,
    ))
    .hedge_after(Duration::from_millis(50))
    .build()
    .expect("a chain")
}

#[tokio::test]
async fn a_first_layer_that_answers_after_the_hedge_went_out_wins_and_the_hedge_is_closed() {
    let metrics = MetricLog::default();
    let _recording = metrics::set_default_local_recorder(&metrics);
    let first = ModelServer::start(Provider::OpenAi).await.expect("a port");
    let second = ModelServer::start(Provider::Anthropic)
        .await
        .expect("a port");
    let (reply, gate) = Reply::new().pause();
    first.reply(reply.text("From the first.").finish());
    second.reply(Reply::new().hang());
    let mut v = driver(desks(hedged(&first, &second, "late-first"))).await;
    v.start_silent().await.expect("a session");
    let release = async {
        assert!(second.wait_requests(1).await, "the hedge went out");
        gate.release();
    };
    let (turn, ()) = tokio::join!(v.user_says("Hello?"), release);
    assert_eq!(turn.expect("a turn").text(), "From the first.");
    assert!(second.wait_hung_up(1).await, "the hedge was closed");
    assert_eq!(metrics.value("voqalize_model_hedges_total{won=first}"), 1.0);
    assert_eq!(
        metrics.value("voqalize_model_requests_total{outcome=hedged_out,provider=anthropic}"),
        1.0
    );
}

#[tokio::test]
async fn a_hedged_request_whose_layers_both_fail_says_the_fallback_line_once() {
    let first = ModelServer::start(Provider::OpenAi).await.expect("a port");
    let second = ModelServer::start(Provider::Anthropic)
        .await
        .expect("a port");
    let (reply, gate) = Reply::new().pause();
    first.reply(reply.error("server had an error"));
    second.answer_with(|_| Reply::error_status(529, "overloaded"));
    let mut v = driver(desks(hedged(&first, &second, "both-fail"))).await;
    v.start_silent().await.expect("a session");
    let release = async {
        assert!(second.wait_requests(1).await, "the hedge went out");
        gate.release();
    };
    let (turn, ()) = tokio::join!(v.user_says("Hello?"), release);
    assert_eq!(turn.expect("a turn").text(), FALLBACK_LINE);
    assert_eq!(first.requests().len(), 1);
}

#[tokio::test]
async fn a_barge_in_during_a_hedge_closes_both_requests() {
    let first = ModelServer::start(Provider::OpenAi).await.expect("a port");
    let second = ModelServer::start(Provider::Anthropic)
        .await
        .expect("a port");
    first.reply(Reply::new().hang());
    second.reply(Reply::new().hang());
    let mut v = driver(desks(hedged(&first, &second, "barged"))).await;
    v.start_silent().await.expect("a session");
    let turn = v.send_user_message("Hello?").await.expect("a turn");
    assert!(second.wait_requests(1).await, "the hedge went out");
    v.send(voqalize::wire::Frame::Interruption { through_turn: turn })
        .await
        .expect("sent");
    assert!(first.wait_hung_up(1).await, "the first request was closed");
    assert!(second.wait_hung_up(1).await, "the hedge was closed");
    // Neither breaker was told anything: the next turn asks the first layer again.
    first.reply(Reply::new().text("Back again.").finish());
    let turn = v.user_says("Hello again?").await.expect("a turn");
    assert_eq!(turn.text(), "Back again.");
    assert_eq!(second.requests().len(), 1);
}

#[tokio::test]
async fn a_layer_that_streams_only_keep_alives_is_left_at_its_first_byte_timeout() {
    let down = ModelServer::start(Provider::Chat).await.expect("a port");
    down.answer_with(|_| Reply::new().keep_alive(Duration::from_millis(20)));
    let up = ModelServer::start(Provider::Chat).await.expect("a port");
    up.answer_with(|_| Reply::new().text("Hello.").finish());
    let layers = two(
        (
            Provider::Chat,
            &down.base_url(),
            "chat-keep-alives",
            Duration::from_millis(300),
        ),
        (Provider::Chat, &up.base_url(), "chat-after-keep-alives"),
    )
    .build()
    .expect("a chain");
    let mut v = driver(move || crate::failover::Desk {
        model: voqalize::voice::Model::new(layers.clone())
            .turn_deadline(Duration::from_secs(30))
            .fallback_line(FALLBACK_LINE),
    })
    .await;
    v.start_silent().await.expect("a session");
    let turn = v.user_says("Hello?").await.expect("a turn");
    assert_eq!(turn.text(), "Hello.");
    assert!(
        down.wait_hung_up(1).await,
        "the keep-alives were hung up on"
    );
    assert_eq!(
        steps(&v, turn.turn_id),
        [
            "model chat-keep-alives",
            "fallback chat-keep-alives  timeout",
            "model chat-after-keep-alives",
        ]
    );
}

#[tokio::test]
async fn layers_whose_timers_are_set_to_no_limit_still_answer_and_move_on() {
    let none = voqalize::model::Timeouts {
        connect: Duration::MAX,
        first_byte: Duration::MAX,
        gap: Duration::MAX,
    };
    let down = ModelServer::start(Provider::Chat).await.expect("a port");
    down.answer_with(|_| Reply::error_status(503, "overloaded"));
    let up = ModelServer::start(Provider::Chat).await.expect("a port");
    up.answer_with(|_| Reply::new().text("Hello.").finish());
    let layers = Fallback::new(layer(
        Provider::Chat,
        &down.base_url(),
        "chat-no-limit-down",
        none,
    ))
    .then(layer(
        Provider::Chat,
        &up.base_url(),
        "chat-no-limit-up",
        none,
    ))
    .build()
    .expect("a chain");
    let mut v = driver(desks(layers)).await;
    v.start_silent().await.expect("a session");
    let turn = v.user_says("Hello?").await.expect("a turn");
    assert_eq!(turn.text(), "Hello.");
    assert_eq!(down.requests().len(), 1);
}
