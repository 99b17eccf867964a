//! The README's main job, run as written: the `coach` example with `--provider offline` answers
//! from its stand-in model, which calls the coach's tools, behind the console. The built example
//! is run with the README's own arguments (addresses moved to free loopback ports) and a call is
//! played against it over a real socket.

use std::time::Duration;

use voqalize_testing::Voqalize;

use crate::deploy::{get, printed_after, repo, run_coach};

/// The arguments after `--` of the README's `cargo run --example coach` command.
fn readme_args() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run --example coach -- "))
        .expect("the README runs the coach example");
    line.trim_start_matches("cargo run --example coach -- ")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_job_answers_offline_calls_the_tools_and_serves_the_console() {
    let mut args = readme_args();
    assert!(args.contains(&"--provider".to_owned()) && args.contains(&"offline".to_owned()));
    assert!(
        args.contains(&"--console".to_owned()),
        "the README's command serves the console"
    );
    for arg in &mut args {
        if arg == "--console" {
            *arg = "--console=127.0.0.1:0".to_owned();
        }
    }
    args.extend(["--listen".to_owned(), "127.0.0.1:0".to_owned()]);
    let (_child, printed) = run_coach(&args, &[]);
    let brain = printed_after(&printed, "serving a brain on ");
    let console = printed_after(&printed, "console: open http://");
    let console = console.split('/').next().expect("an address").to_owned();

    // The console's page is served where it says.
    let page = get(&console, "/");
    assert_eq!(page.0, 200, "the console's page");

    let mut call = Voqalize::connect(&brain, "main-job", None)
        .await
        .expect("the brain takes an unverified call");
    call.start_silent().await.expect("the call starts");
    let said = call.user_says("I ate a sandwich").await.expect("a turn");
    assert!(said.text().contains("logging that meal"), "{}", said.text());
    let said = call.user_says("show me this week").await.expect("a turn");
    assert!(said.text().contains("week"), "{}", said.text());
    let commands = call
        .collect_ui_commands(Duration::from_secs(10))
        .await
        .expect("ui commands");
    assert!(
        commands
            .iter()
            .any(|c| c["command"] == "show_section" && c["payload"]["name"] == "week"),
        "the show tool ran: {commands:?}"
    );
    // A `#[needs_result_now]` tool: the stand-in reads its result and speaks it.
    let said = call.user_says("what is my average?").await.expect("a turn");
    assert!(said.text().contains("5.4"), "{}", said.text());
    call.assert_clean();
}
