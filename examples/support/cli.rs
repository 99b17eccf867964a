//! The command line the examples share: where to listen (or the Cortex relay to dial), which
//! tokens to trust, and the flags a deployed brain takes (probes, load shedding, the drain; see
//! `deploy/`). The model-backed examples add the provider's flags (`model.rs`).

use clap::Parser;
use voqalize::MakeBrain;
use voqalize::host::HostOptions;

/// Serve a Voqalize brain on a WebSocket.
#[derive(Parser, Debug)]
#[command(group(clap::ArgGroup::new("auth").required(true).args(["public_key", "allow_unverified", "production", "cortex", "console"])))]
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
    /// Also serve the voice console on this address (default 127.0.0.1:8788) and print its URL:
    /// open it in a browser to talk to the brain. The brain then takes unverified calls
    /// (development only).
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:8788",
        conflicts_with_all = ["public_key", "production", "cortex"]
    )]
    pub console: Option<String>,
    /// The console `--console` serves (made on first use, so a model example can show its tool
    /// runs in it before the brain listens).
    #[arg(skip)]
    pub console_handle: std::sync::OnceLock<voqalize::console::Console>,
    /// Write logs as one JSON object per line (session fields at the top level).
    #[arg(long)]
    pub json_logs: bool,
    /// Serve over the Cortex relay at this `/agent` URL (`ws://` or `wss://`) instead of listening:
    /// the brain dials out and every call rides that one connection.
    #[arg(long, requires = "api_key", value_name = "URL")]
    pub cortex: Option<String>,
    /// The agent's API key for the relay.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// The agent version announced to the relay.
    #[arg(long, default_value = "dev")]
    pub agent_version: String,
    /// Serve the platform's probes (`/healthz`, `/readyz`) and the metrics in Prometheus' text
    /// format (`/metrics`) on this address, such as 0.0.0.0:8081.
    #[arg(long, value_name = "ADDR")]
    pub health_listen: Option<String>,
    /// Refuse new calls (`503`) and report not ready while this process used more than this
    /// share of its CPUs over the last 5 s, such as 0.8 (direct leg).
    #[arg(long, value_name = "SHARE", conflicts_with = "cortex")]
    pub max_load: Option<f64>,
    /// With --max-load: the CPUs the share is of (default: those the process may use). In
    /// Kubernetes without a CPU limit, the pod's CPU request, such as 0.5 for 500m.
    #[arg(long, value_name = "CPUS", requires = "max_load")]
    pub cpus: Option<f64>,
    /// Host at most this many calls at once (direct leg: one more is refused with `503`).
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<usize>,
    /// How long SIGTERM lets running calls go on before they are ended, in s.
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub drain_timeout: u64,
}

/// Parses the command line, binds, prints the URL and serves `factory` until killed.
#[allow(dead_code)] // the model-backed examples parse with `model::model_and_host` instead
pub async fn serve(factory: impl MakeBrain) -> Result<(), Box<dyn std::error::Error>> {
    Args::parse().serve(factory).await
}

impl Args {
    /// The console `--console` serves (its brain URL is set once the brain listens).
    pub fn console_handle(&self) -> voqalize::console::Console {
        self.console_handle
            .get_or_init(|| voqalize::console::Console::new("ws://127.0.0.1:0"))
            .clone()
    }

    /// Binds, prints the URL and serves `factory` until killed.
    pub async fn serve(self, factory: impl MakeBrain) -> Result<(), Box<dyn std::error::Error>> {
        raise_open_file_limit();
        give_back_freed_memory();
        self.init_logging()?;
        if let (Some(url), Some(key)) = (&self.cortex, &self.api_key) {
            // The relay logs `relay: connected to ...` once it is; a relay that cannot be reached
            // (its host does not resolve, TLS fails) ends this with an error after a minute.
            println!("connecting to the relay at {url}");
            // SIGTERM or Ctrl-C: no new call, the running ones drain (--drain-timeout), then it
            // returns; a second one ends them at once. The same drain as the direct leg's.
            let shutdown = self.shutdown();
            let mut relay =
                voqalize::relay::Relay::builder(url.as_str(), self.agent_version.as_str())
                    .api_key(key.as_str())
                    .shutdown(&shutdown);
            if let Some(n) = self.max_sessions {
                relay = relay.max_sessions(n);
            }
            let relay = relay.build()?;
            self.probes(voqalize::host::Health::new(&shutdown).relay(&relay))
                .await?;
            report(relay.serve(factory, shutdown.triggered()).await?);
            return Ok(());
        }
        let options = if self.allow_unverified || self.console.is_some() {
            HostOptions::builder().allow_unverified()
        } else if self.production {
            HostOptions::builder()
        } else {
            let pems = self
                .public_key
                .iter()
                .map(|p| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display())))
                .collect::<Result<Vec<_>, _>>()?;
            HostOptions::builder().public_keys(pems)
        };
        // SIGTERM or Ctrl-C drains the calls (--drain-timeout at most); a second one ends them
        // at once.
        let shutdown = self.shutdown();
        let mut options = options.shutdown(&shutdown);
        if let Some(n) = self.max_sessions {
            options = options.max_sessions(n);
        }
        let mut health = voqalize::host::Health::new(&shutdown);
        if let Some(share) = self.max_load {
            let mut load =
                voqalize::host::Load::cpu(std::time::Duration::from_secs(5)).threshold(share);
            if let Some(cpus) = self.cpus {
                load = load.cpus(cpus);
            }
            options = options.load(&load);
            health = health.load(&load);
        }
        self.probes(health).await?;
        let listener = tokio::net::TcpListener::bind(&self.listen).await?;
        let brain_url = format!("ws://{}", listener.local_addr()?);
        println!("serving a brain on {brain_url}");
        if let Some(address) = &self.console {
            let console = tokio::net::TcpListener::bind(address).await?;
            println!(
                "console: open http://{}/ in a browser to talk to the brain",
                console.local_addr()?
            );
            let handle = self.console_handle().brain_url(brain_url);
            tokio::spawn(async move {
                let served = handle.serve(console, std::future::pending()).await;
                if let Err(e) = served {
                    eprintln!("console: {e}");
                }
            });
        }
        use std::io::Write as _;
        std::io::stdout().flush()?;
        // On a worker thread: `#[tokio::main]` polls its own future on the main thread, and an
        // accept loop there would hand every new call across threads.
        let options = options.build()?;
        let drained = tokio::spawn(voqalize::host::serve(listener, factory, options)).await??;
        report(drained);
        Ok(())
    }
}

impl Args {
    /// Installs the log lines `--json-logs` chooses (human ones by default), at `info` unless
    /// `RUST_LOG` says otherwise. Once per process: a second call does nothing, so an example
    /// that logs before [`serve`](Self::serve) (`mcp_desk` connecting its MCP server) can call it
    /// first.
    pub fn init_logging(&self) -> Result<(), voqalize::logging::LoggingError> {
        static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if DONE.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let format = if self.json_logs {
            voqalize::logging::Format::Json
        } else {
            voqalize::logging::Format::Human
        };
        // rmcp, the MCP client underneath, logs what a server says at `info` (its whole
        // `instructions`, unclipped): only its warnings.
        voqalize::logging::init("info,rmcp=warn", format)
    }

    /// The shutdown SIGTERM and Ctrl-C trigger, draining for `--drain-timeout`.
    fn shutdown(&self) -> voqalize::host::Shutdown {
        voqalize::host::Shutdown::new(std::time::Duration::from_secs(self.drain_timeout))
            .on_signals()
    }

    /// With `--health-listen`: binds it, prints its URL, and serves `/healthz`, `/readyz` and
    /// `/metrics` (a Prometheus recorder installed for the process) until the drain is done.
    async fn probes(
        &self,
        health: voqalize::host::Health,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let Some(address) = &self.health_listen else {
            return Ok(());
        };
        // The durations as histograms (buckets from 1 ms to 10 s), which add up across pods;
        // without buckets the exporter writes summaries, which do not.
        let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Suffix("_seconds".to_owned()),
                &[
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ],
            )?
            .install_recorder()?;
        voqalize::metrics::describe();
        let listener = tokio::net::TcpListener::bind(address).await?;
        println!(
            "probes on http://{}: /healthz, /readyz, /metrics",
            listener.local_addr()?
        );
        // Health::serve bounds the port (connections, a deadline on each request's head), which
        // is bound on 0.0.0.0 in deploy/.
        let served = health.metrics(move || metrics.render()).serve(listener);
        tokio::spawn(async move {
            if let Err(e) = served.await {
                eprintln!("probes: {e}");
            }
        });
        Ok(())
    }
}

/// Prints what the drain did.
fn report(report: voqalize::host::DrainReport) {
    println!(
        "shut down: {} calls finished during the drain, {} ended by it",
        report.drained, report.ended
    );
}

/// Raises the soft limit on open files to the hard limit: every call holds a socket, and the
/// common soft default of 1,024 would refuse calls long before the machine is busy.
fn raise_open_file_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: both calls get a pointer to a live, properly aligned `rlimit` on this stack.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    eprintln!("could not raise the open-file limit");
                }
            }
        }
    }
}

/// Every 10 s, hands memory freed by ended calls back to the system. glibc keeps freed heap pages
/// of a process that once held many calls; without this the brain's RSS stays at its peak.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::spawn(async {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
        loop {
            every.tick().await;
            // SAFETY: malloc_trim takes no pointer and only releases free memory.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    });
}
