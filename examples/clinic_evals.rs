//! The clinic's eval suite: every scenario in `examples/evals/clinic` (TOML, one call each) is
//! played against the clinic's desk (`support/clinic.rs`) by a scripted or a simulated caller
//! over the real wire, checked, judged, and reported; the exit code fails when a scenario's pass
//! rate is below what it requires, so CI can run it before every prompt change.
//!
//! ```text
//! cargo run --example clinic_evals -- --provider offline
//! GEMINI_API_KEY=... cargo run --example clinic_evals -- --repetitions 3 --out target/evals
//! ```
//!
//! `--provider offline` (no key, no network) answers the desk, the simulated caller and the judge
//! with stand-in models in this process that play by a few rules (`support/clinic_offline.rs`).
//! With a real provider, that provider's model answers all three (a team would often give the
//! caller and the judge a cheaper model: see `Suite::caller` and `Suite::judge`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize_testing::eval::{Judge, Scenario, SimulatedCaller, Suite};
use voqalize_testing::{ModelServer, ReadBack, Reply};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/clinic.rs"]
mod clinic;
#[path = "support/clinic_offline.rs"]
mod clinic_offline;
// The model flags, not the console or the hosting this example does not serve.
#[allow(dead_code)]
#[path = "support/model.rs"]
mod model;

/// Run the clinic's eval suite: its scenarios against the clinic's desk.
#[derive(Parser, Debug)]
struct EvalArgs {
    #[command(flatten)]
    provider: model::ProviderArgs,
    /// The folder of scenario files.
    #[arg(long, value_name = "DIR", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/evals/clinic"))]
    scenarios: PathBuf,
    /// Where to write report.txt, transcripts.txt and junit.xml.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// How many times each scenario runs (a scenario's own `repetitions` wins).
    #[arg(long, default_value_t = 1)]
    repetitions: u32,
    /// Runs at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// The seed of the random barge-ins.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[tokio::main]
async fn main() -> Result<std::process::ExitCode, Box<dyn std::error::Error>> {
    let args = EvalArgs::parse();
    let scenarios = Scenario::load_dir(&args.scenarios)?;
    let offline = args.provider.which == model::Provider::Offline;
    let (desk, caller, judge) = if offline {
        (
            stand_in(clinic_offline::desk).await?,
            stand_in(clinic_offline::simulated_caller).await?,
            stand_in(clinic_offline::judge).await?,
        )
    } else {
        let layer = args.provider.layer()?;
        (layer.clone(), layer.clone(), layer)
    };
    let report = Suite::new(move || {
        // Each call its own records: a slot one run books stays open for the next.
        clinic::Desk::new(Model::new(desk.clone()), Arc::new(clinic::Ledger::new()))
    })
    .scenarios(scenarios)
    .caller(SimulatedCaller::new(caller))
    .judge(Judge::new(judge))
    .greeting(false)
    .repetitions(args.repetitions)
    .concurrency(args.concurrency)
    .seed(args.seed)
    .run()
    .await;
    println!("{report}");
    if let Some(out) = &args.out {
        report.write_to(out)?;
        println!("reports written to {}", out.display());
    }
    Ok(report.exit_code())
}

/// The stand-in models of `--provider offline`, kept for the process.
static STAND_INS: std::sync::Mutex<Vec<ModelServer>> = std::sync::Mutex::new(Vec::new());

/// A stand-in model on a free port of 127.0.0.1 answering by `rules`, and a layer that talks to
/// it (the server lives as long as the process).
async fn stand_in(
    rules: impl Fn(&ReadBack) -> Reply + Send + Sync + 'static,
) -> Result<ModelLayer, Box<dyn std::error::Error>> {
    let server = ModelServer::start(voqalize_testing::Provider::Gemini).await?;
    server.answer_with(rules);
    let layer = voqalize::model::Gemini::builder("offline")
        .model("stand-in")
        .base_url(server.base_url())
        .build()?;
    // A server stops when dropped: these serve until the process ends.
    STAND_INS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(server);
    Ok(ModelLayer::from(layer))
}
