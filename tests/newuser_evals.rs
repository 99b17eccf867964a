//! Evals as a new user writes them: a pizza desk (a model brain with two tools) answered offline by
//! a `ModelServer` stand-in, played by scripted callers (two TOML files, one Rust scenario with a
//! barge-in rule) and a simulated caller graded by a judge, each over a stand-in of its own. The
//! suite passes on the desk as written and catches a prompt change that drops a house rule.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use voqalize::json;
use voqalize::prelude::*;
use voqalize_testing::eval::{
    BargeRule, Check, Ending, Judge, Scenario, SimulatedCaller, Suite, SuiteReport,
};
use voqalize_testing::{ModelServer, Provider, ReadBack, Reply, Said};

/// The desk's instruction: the stand-in model obeys its house rule only while it says so.
const INSTRUCTION: &str = "You take pizza orders on the phone. Ask for the size before you order. \
     Never put pineapple on a pizza.";

/// The same instruction after a careless prompt change: the house rule is gone.
const INSTRUCTION_WITHOUT_THE_RULE: &str =
    "You take pizza orders on the phone. Ask for the size before you order.";

/// The pizzas the desk bakes.
const PIZZAS: [&str; 3] = ["margherita", "funghi", "diavola"];

/// The sizes it bakes them in.
const SIZES: [&str; 2] = ["small", "large"];

/// An order to place.
#[json_type]
struct Order {
    /// The pizza: `margherita`, `funghi` or `diavola`.
    pizza: String,
    /// `small` or `large`.
    size: String,
}

/// One call's pizza desk.
struct PizzaDesk {
    model: Model,
}

/// Order numbers, shared by every call.
static NEXT_ORDER: AtomicU64 = AtomicU64::new(40);

impl Brain for PizzaDesk {
    async fn greet(&self, _session: &Session) -> BrainResult<Option<String>> {
        Ok(Some("Luigi's pizza, what can I get you?".into()))
    }

    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl PizzaDesk {
    /// Today's pizzas and sizes, to read to the caller.
    #[tool]
    #[needs_result_now]
    async fn menu(&self) -> &'static str {
        "margherita, funghi and diavola, each small or large"
    }

    /// Place the caller's order with the kitchen; returns the order number to read back.
    #[tool]
    #[needs_result_now]
    async fn place_order(&self, args: Order) -> String {
        let number = NEXT_ORDER.fetch_add(1, Ordering::Relaxed);
        format!("order {number}: one {} {}", args.size, args.pizza)
    }
}

/// A factory of desks asking the stand-in at `base` with `instruction`.
fn desks(
    base: String,
    instruction: &'static str,
) -> impl Fn() -> PizzaDesk + Send + Sync + 'static {
    move || PizzaDesk {
        model: Model::new(
            Gemini::builder("test-key")
                .base_url(&base)
                .build()
                .expect("a layer"),
        )
        .instruction(instruction),
    }
}

/// The first of `words` that `text` holds (in any case).
fn first_in<'a>(text: &str, words: &[&'a str]) -> Option<&'a str> {
    let text = text.to_lowercase();
    words.iter().copied().find(|w| text.contains(w))
}

/// The stand-in model behind the desk: it reads the conversation and answers as a well-behaved
/// model would, keeping the pineapple rule only while the instruction states it.
fn desk_model(request: &ReadBack) -> Reply {
    let strict = request
        .instruction
        .as_deref()
        .is_some_and(|i| i.contains("Never put pineapple"));
    // A follow-up after a #[needs_result_now] tool: say what it found.
    if let Some(Said::Result { output, .. }) = request.said.last() {
        let called = request.said.iter().rev().find_map(|s| match s {
            Said::Call { name, .. } => Some(name.as_str()),
            _ => None,
        });
        return match called {
            Some("place_order") => {
                let number: String = output.chars().filter(char::is_ascii_digit).collect();
                Reply::new()
                    .text(&format!("Your order number is {number}. Enjoy your pizza!"))
                    .usage(200, 10)
                    .finish()
            }
            _ => Reply::new()
                .text("Today we have margherita, funghi and diavola, small or large.")
                .finish(),
        };
    }
    // What the caller said since the last order, newest last.
    let since_order: Vec<&str> = request
        .said
        .iter()
        .rev()
        .take_while(|s| !matches!(s, Said::Call { name, .. } if name == "place_order"))
        .filter_map(|s| match s {
            Said::User(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let latest = since_order.first().copied().unwrap_or_default();
    if latest.to_lowercase().contains("bye") {
        return Reply::new().text("Goodbye!").finish();
    }
    if latest.to_lowercase().contains("menu") {
        return Reply::new()
            .text("Let me check. ")
            .call("menu", json!({}))
            .finish();
    }
    if latest.to_lowercase().contains("pineapple") {
        if strict {
            return Reply::new()
                .text("Sorry, we never put pineapple on a pizza. Something else?")
                .finish();
        }
        return Reply::new()
            .text("One large pineapple pizza, coming up. ")
            .call(
                "place_order",
                json!({"pizza": "pineapple", "size": "large"}),
            )
            .finish();
    }
    let pizza = since_order.iter().find_map(|t| first_in(t, &PIZZAS));
    let size = since_order.iter().find_map(|t| first_in(t, &SIZES));
    match (pizza, size) {
        (Some(pizza), Some(size)) => Reply::new()
            .text(&format!("One {size} {pizza}, coming up. "))
            .call("place_order", json!({"pizza": pizza, "size": size}))
            .finish(),
        (Some(_), None) => Reply::new()
            .text("What size would you like, small or large?")
            .finish(),
        _ => Reply::new()
            .text("What pizza would you like? We have margherita, funghi and diavola.")
            .finish(),
    }
}

/// The text of the newest user message of `request` (for the caller's and the judge's stand-ins:
/// the agent's heard words, and the judge's question).
fn last_user(request: &ReadBack) -> &str {
    request
        .said
        .iter()
        .rev()
        .find_map(|s| match s {
            Said::User(text) => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The fact `key` the role-play instruction lists (`- key: value`).
fn fact<'a>(request: &'a ReadBack, key: &str) -> Option<&'a str> {
    let prefix = format!("- {key}: ");
    request
        .instruction
        .as_deref()?
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
}

/// The stand-in model playing the simulated caller: it gives its facts when the agent asks for
/// them, and hangs up once it hears an order number.
fn caller_model(request: &ReadBack) -> Reply {
    let heard = last_user(request).to_lowercase();
    let line = if heard.contains("order number") {
        "Great, thanks. Bye! [hang up: goal met]".to_string()
    } else if heard.contains("what size") {
        format!(
            "{}, please",
            fact(request, "size").unwrap_or("I do not know")
        )
    } else if heard.contains("what can i get") || heard.contains("what pizza") {
        format!("A {}, please", fact(request, "pizza").unwrap_or("pizza"))
    } else {
        "Never mind, I will call later. [hang up: gave up]".to_string()
    };
    Reply::new().text(&line).usage(300, 8).finish()
}

/// The stand-in model playing the judge: it passes a call whose agent reads an order number,
/// quoting that line, and fails any other, quoting the agent's last line.
fn judge_model(request: &ReadBack) -> Reply {
    let question = last_user(request);
    let call = question
        .split_once("The call:\n")
        .map_or("", |(_, call)| call);
    let agent_lines: Vec<&str> = call
        .lines()
        .filter_map(|l| l.strip_prefix("agent: "))
        .collect();
    let read_back = agent_lines
        .iter()
        .find(|l| l.to_lowercase().contains("order number"));
    let (verdict, quote, why) = match read_back {
        Some(line) => ("pass", *line, "the agent reads the order number"),
        None => (
            "fail",
            agent_lines.last().copied().unwrap_or_default(),
            "no order number",
        ),
    };
    let item = "The agent reads back an order number";
    let answer =
        json!({"verdict": verdict, "reasons": [{"item": item, "quote": quote, "why": why}]});
    Reply::new()
        .text(&answer.to_string())
        .usage(500, 40)
        .finish()
}

/// A fresh folder under the system's temp folder for one test's report.
fn report_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("newuser-evals-{name}-{}", std::process::id()))
}

/// The scenarios: two files, one built in Rust with a barge-in rule, one simulated caller.
fn scenarios() -> Vec<Scenario> {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/newuser_evals");
    let mut all = Scenario::load_dir(folder).expect("the scenario files");
    all.push(
        Scenario::new("impatient")
            .lines(["What's on the menu?", "A small diavola"])
            .barge_in(BargeRule::AfterWords(3))
            .check(Check::tool_called_where(
                "place_order",
                "a small diavola",
                |args| args["pizza"] == "diavola" && args["size"] == "small",
            ))
            .check(Check::custom(
                "the menu answer was cut after three words",
                |call| {
                    let cut = call
                        .agent_lines()
                        .find(|l| l.cut)
                        .ok_or("no answer was cut")?;
                    match cut.heard.split_whitespace().count() {
                        3 => Ok(()),
                        n => Err(format!("heard {n} words: {:?}", cut.heard)),
                    }
                },
            )),
    );
    all.push(
        Scenario::new("hungry_student")
            .persona(
                "A hungry student, brief and polite",
                "Order a small margherita",
            )
            .fact("pizza", "margherita")
            .fact("size", "small")
            .fact("name", "Ana")
            .check(Check::tool_called_where(
                "place_order",
                "a small margherita",
                |args| args["pizza"] == "margherita" && args["size"] == "small",
            ))
            .rubric("The agent reads back an order number"),
    );
    all
}

/// The suite against desks with `instruction`, each model over a stand-in of its own.
async fn run_suite(instruction: &'static str) -> SuiteReport {
    let desk = ModelServer::start(Provider::Gemini)
        .await
        .expect("the desk's stand-in");
    desk.answer_with(desk_model);
    let caller = ModelServer::start(Provider::Gemini)
        .await
        .expect("the caller's stand-in");
    caller.answer_with(caller_model);
    let judge = ModelServer::start(Provider::Gemini)
        .await
        .expect("the judge's stand-in");
    judge.answer_with(judge_model);
    let layer = |server: &ModelServer| {
        Gemini::builder("test-key")
            .base_url(server.base_url())
            .build()
            .expect("a layer")
    };
    Suite::new(desks(desk.base_url(), instruction))
        .scenarios(scenarios())
        .caller(SimulatedCaller::new(layer(&caller)))
        .judge(Judge::new(layer(&judge)))
        .repetitions(2)
        .run()
        .await
}

#[tokio::test]
async fn the_pizza_desk_passes_its_evals() {
    let report = run_suite(INSTRUCTION).await;
    println!("{report}");
    let dir = report_dir("passes");
    report.write_to(&dir).expect("the report written");
    let table = std::fs::read_to_string(dir.join("report.txt")).expect("report.txt");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).expect("junit.xml");
    std::fs::remove_dir_all(&dir).expect("the report folder removed");
    assert!(report.passed(), "{report}\n{}", report.transcripts());
    assert!(table.contains("hungry_student"), "{table}");
    assert!(junit.contains(r#"<testsuite name="impatient""#), "{junit}");
    // The simulated caller hung up once it heard its order number.
    let student = report
        .scenarios
        .iter()
        .find(|s| s.name == "hungry_student")
        .expect("ran");
    assert!(
        student
            .runs
            .iter()
            .all(|r| r.transcript.ending == Ending::GoalMet)
    );
}

#[tokio::test]
async fn the_evals_catch_a_dropped_house_rule() {
    let report = run_suite(INSTRUCTION_WITHOUT_THE_RULE).await;
    println!("{report}");
    assert!(
        !report.passed(),
        "the planted bug went unnoticed:\n{report}"
    );
    let failed: Vec<&str> = report
        .scenarios
        .iter()
        .filter(|s| !s.passed)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(failed, ["no_pineapple"], "{report}");
}
