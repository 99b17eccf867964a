//! The voice console for any brain already serving on the direct leg: open the printed URL in a
//! browser and talk to it (see `voqalize::console`).
//!
//! ```text
//! cargo run --example echo -- --allow-unverified &
//! cargo run --example console -- --brain-url ws://127.0.0.1:8787
//! ```
//!
//! The brain must take unverified calls, or pass `--token` with one its keys accept. The model
//! examples start a console beside their brain with `--console` instead.

use clap::Parser;

/// Serve the voice console for a brain.
#[derive(Parser, Debug)]
struct Args {
    /// The brain's URL, such as ws://127.0.0.1:8787.
    #[arg(long, value_name = "URL")]
    brain_url: String,
    /// Where the console's page is served.
    #[arg(long, default_value = "127.0.0.1:8788")]
    listen: String,
    /// A token to send as `Authorization: Bearer` on every call.
    #[arg(long)]
    token: Option<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    voqalize::logging::init("info", voqalize::logging::Format::Human)?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!(
        "console: open http://{}/ in a browser to talk to the brain at {}",
        listener.local_addr()?,
        args.brain_url
    );
    let mut console = voqalize::console::Console::new(args.brain_url);
    if let Some(token) = args.token {
        console = console.token(token);
    }
    console.serve(listener, std::future::pending()).await?;
    Ok(())
}
