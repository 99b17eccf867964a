//! The command line the examples share: where to listen and which tokens to trust.

use clap::Parser;
use voqalize::MakeBrain;
use voqalize::host::HostOptions;

/// Serve a Voqalize brain on a WebSocket.
#[derive(Parser, Debug)]
#[command(group(clap::ArgGroup::new("auth").required(true).args(["public_key", "allow_unverified", "production"])))]
pub struct Args {
    /// Address to listen on, such as 127.0.0.1:8787 (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: String,
    /// A PEM public key (SPKI or PKCS#1 RSA) whose RS256 tokens are accepted; repeat for several.
    #[arg(long = "public-key", value_name = "PEM_FILE")]
    pub public_key: Vec<std::path::PathBuf>,
    /// Accept every connection without a token (development only).
    #[arg(long)]
    pub allow_unverified: bool,
    /// Trust the embedded production key (real Voqalize calls).
    #[arg(long)]
    pub production: bool,
}

/// Parses the command line, binds, prints the URL and serves `factory` until killed.
pub async fn serve(factory: impl MakeBrain) -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let options = if args.allow_unverified {
        HostOptions::allow_unverified()
    } else if args.production {
        HostOptions::production()
    } else {
        let pems = args
            .public_key
            .iter()
            .map(|p| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display())))
            .collect::<Result<Vec<_>, _>>()?;
        HostOptions::with_public_keys(pems)?
    };
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("serving a brain on ws://{}", listener.local_addr()?);
    use std::io::Write as _;
    std::io::stdout().flush()?;
    voqalize::host::tungstenite::serve(listener, factory, options).await?;
    Ok(())
}
