//! The dispatcher, on a brain written the way `#[brain]` writes one.

use super::*;

#[derive(Default)]
struct Desk {
    signed_in: AtomicBool,
    runs: AtomicUsize,
}

#[derive(Debug)]
struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused: {}", self.0)
    }
}

#[derive(Serialize)]
struct Booked {
    table: u32,
}

impl Desk {
    async fn transfer(&self, args: Transfer) -> String {
        format!("{}:{:?}", args.department, args.priority)
    }
    async fn reserve(&self, args: Reserve) -> Result<Booked, Refused> {
        if args.guest.party_size > 8 {
            Err(Refused("too many"))
        } else {
            Ok(Booked { table: 7 })
        }
    }
    async fn ping(&self) {}
    async fn boom(&self) -> u32 {
        panic!("kaput")
    }
    async fn slow(&self) -> &'static str {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        "late"
    }
    async fn secret(&self) -> &'static str {
        "42"
    }
}

impl Toolbox for Desk {
    fn tools(&self) -> &'static [ToolDecl] {
        private::tool_table::<Self>(|| {
            vec![
                private::declare::<Transfer>(info("transfer", 0)),
                private::declare::<Reserve>(info("reserve", 1)),
                private::declare_without_args(info("ping", 2)),
                private::declare_without_args(info("boom", 3)),
                private::declare_without_args(info("slow", 4)),
                private::declare_without_args(info("secret", 5)),
            ]
        })
    }

    fn tool_visible(&self, tool: &ToolDecl) -> bool {
        tool.name() != "secret" || self.signed_in.load(Ordering::SeqCst)
    }

    // The borrow in `(&Probe::of(&out)).kind()` picks the conversion (autoref specialisation).
    #[allow(clippy::needless_borrow)]
    fn __run_tool(&self, index: usize, arguments: Value) -> ToolRun<'_> {
        use private::{Probe, ViaPlain as _, ViaResult as _};
        self.runs.fetch_add(1, Ordering::SeqCst);
        match index {
            0 => Box::pin(async move {
                let args = private::parse_args::<Transfer>(arguments)?;
                let out = self.transfer(args).await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            1 => Box::pin(async move {
                let args = private::parse_args::<Reserve>(arguments)?;
                let out = self.reserve(args).await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            2 => Box::pin(async move {
                let out = self.ping().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            3 => Box::pin(async move {
                let out = self.boom().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            4 => Box::pin(async move {
                let out = self.slow().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            5 => Box::pin(async move {
                let out = self.secret().await;
                (&Probe::of(&out)).kind().finish(out)
            }),
            _ => private::unknown_index(index),
        }
    }
}

async fn call(desk: &Desk, name: &str, arguments: impl Into<Arguments>) -> ToolOutcome {
    let turn = desk.tools_for_turn();
    desk.call_tool(&turn, name, arguments.into()).await
}

#[tokio::test]
async fn a_call_runs_the_tool_and_returns_its_json() {
    let desk = Desk::default();
    let out = call(
        &desk,
        "transfer",
        json!({"department": "billing", "priority": 3}),
    )
    .await;
    assert_eq!(out.result, Ok(json!("billing:Some(3)")));
    assert_eq!(out.response(), json!({"result": "billing:Some(3)"}));
    let out = call(&desk, "ping", "").await;
    assert_eq!(out.response(), json!({"result": null}));
    let out = call(
        &desk,
        "reserve",
        r#"{"guest": {"name": "Ada", "party_size": 2}, "alt": null}"#,
    )
    .await;
    assert_eq!(out.result, Ok(json!({"table": 7})));
}

#[tokio::test]
async fn gemini_floats_count_as_integers() {
    let desk = Desk::default();
    let out = call(
        &desk,
        "transfer",
        json!({"department": "b", "priority": 3.0}),
    )
    .await;
    assert_eq!(out.result, Ok(json!("b:Some(3)")));
    let out = call(
        &desk,
        "transfer",
        json!({"department": "b", "priority": 3.5}),
    )
    .await;
    assert_eq!(
        out.result.unwrap_err().kind,
        ToolErrorKind::InvalidArguments
    );
}

#[tokio::test]
async fn every_failure_is_an_error_the_model_reads() {
    let desk = Desk::default();

    let out = call(&desk, "nope", "{}").await;
    let e = out.result.clone().unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unknown);
    assert_eq!(
        out.response(),
        json!({"error": "there is no tool named 'nope'"})
    );

    let e = call(
        &desk,
        "reserve",
        json!({"guest": {"name": "A", "party_size": "x"}}),
    )
    .await
    .result
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    assert!(e.message.contains("`guest.party_size`"), "{e}");
    assert!(e.message.contains("expected u8"), "{e}");

    let e = call(&desk, "reserve", json!({})).await.result.unwrap_err();
    assert_eq!(e.message, "invalid arguments: missing field `guest`");

    let e = call(&desk, "transfer", "{not json")
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    assert!(
        e.message.starts_with("the arguments are not valid JSON"),
        "{e}"
    );

    let e = call(&desk, "transfer", json!([1]))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.message, "the arguments must be a JSON object, got [1]");

    let e = call(
        &desk,
        "reserve",
        json!({"guest": {"name": "A", "party_size": 9}}),
    )
    .await
    .result
    .unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ToolErrorKind::Failed, "refused: too many")
    );

    let e = call(&desk, "boom", "{}").await.result.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Panicked);
    assert!(e.message.contains("kaput"), "{e}");

    // The brain is fine afterwards.
    let out = call(&desk, "ping", "{}").await;
    assert!(!out.is_error());
}

#[tokio::test]
async fn a_hidden_tool_cannot_run_even_when_named() {
    let desk = Desk::default();
    let turn = desk.tools_for_turn();
    assert!(!turn.contains("secret"));
    assert_eq!(turn.len(), 5);
    let before = desk.runs.load(Ordering::SeqCst);
    let e = desk
        .call_tool(&turn, "secret", Arguments::Raw("{}".into()))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Hidden);
    assert_eq!(desk.runs.load(Ordering::SeqCst), before);

    // Signing in mid-turn does not change this turn's set; the next turn sees the tool.
    desk.signed_in.store(true, Ordering::SeqCst);
    let e = desk
        .call_tool(&turn, "secret", Arguments::Raw("{}".into()))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Hidden);
    let out = call(&desk, "secret", "{}").await;
    assert_eq!(out.result, Ok(json!("42")));

    // A set built from another table runs nothing.
    let foreign = ToolSet::from_table(
        Box::leak(vec![ToolDecl::new(info("ping", 2), None, None)].into_boxed_slice()),
        |_| true,
    );
    let e = desk
        .call_tool(&foreign, "ping", Arguments::Raw("{}".into()))
        .await
        .result
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Hidden);
}

#[test]
fn the_call_future_is_send_and_the_table_is_built_once() {
    // A brain can be used as a trait object.
    let boxed: Box<dyn Toolbox> = Box::new(Desk::default());
    assert_eq!(boxed.tools_for_turn().len(), 5);
    fn assert_send<T: Send>(_: &T) {}
    let desk = Desk::default();
    let turn = desk.tools_for_turn();
    let fut = desk.call_tool(&turn, "ping", Arguments::Raw(String::new()));
    assert_send(&fut);
    drop(fut);
    assert!(std::ptr::eq(desk.tools(), Desk::default().tools()));
}

/// A slow call runs to its end, is timed, and is noted at debug level only: how loud it is is the
/// caller's to decide (the voice core warns once per session, then counts: docs/protocol.md §6.4).
#[test]
fn a_slow_call_is_timed_not_cancelled_and_not_warned_about_here() {
    let (out, text) = crate::logging::logged_at_debug(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let desk = Desk::default();
            call(&desk, "slow", "{}").await
        })
    });
    // Only what is stable under load: the slow call ran to its end and took at least its sleep.
    // The measured time is never compared to an upper bound (a loaded machine makes it anything
    // above 30 ms).
    assert_eq!(out.result, Ok(json!("late")));
    assert!(out.elapsed.as_millis() >= 30);
    let noted: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("tool Desk::slow took "))
        .collect();
    assert_eq!(noted.len(), 1, "{text}");
    assert!(noted[0].contains("DEBUG"), "{text}");
    assert!(noted[0].contains("ms, over the 20ms budget"), "{text}");
}
