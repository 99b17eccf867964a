//! A load tool that is never the bottleneck: many sessions at once against a brain (Rust or
//! Python: the same wire), each on a lean client of its own (one small-buffered WebSocket, frames
//! encoded and decoded with `voqalize::wire`, nothing recorded but the timings).
//!
//! ```text
//! cargo run --release --example workload -- --listen 127.0.0.1:8787 --allow-unverified &
//! # saturating: 100 calls at once until 1,000 are done, no think time
//! cargo run --release --example load -- --url ws://127.0.0.1:8787 --calls 1000 --concurrency 100
//! # paced: 1,000 sessions started over 5 s, 10 turns each, 1 s between a turn's end and the next
//! cargo run --release --example load -- --url ws://127.0.0.1:8787 --sessions 1000 --turns 10 --think-ms 1000 --ramp-s 5
//! ```
//!
//! Each call: connect, `SessionStart` (turn 1), `--turns` user messages (turns 2, 3, ...), then
//! `End`. A turn is timed from its `UserMessage` to its first `SpeechChunk` ("first chunk") and to
//! its last `SpeechEnd` ("last end"); every unit is finalized at its `SpeechEnd` with all of its
//! text, a `SpeechCancel` at once with the text so far, and a `configure` is accepted. The wire has
//! no turn-complete frame: as in `voqalize::testing`, a turn is over once it opened a unit and every
//! unit it opened has ended (`--quiet-ms` waits that long more for another unit). Without
//! `--think-ms` and `--ramp-s` the run is saturating: `--concurrency` calls at once (default 50)
//! until `--calls` are done. With either it is paced: `--ramp-s` spreads the session starts evenly
//! over that many seconds, `--think-ms` pauses between a turn's end and the next message, and
//! `--concurrency` defaults to `--calls` (every session at once).
//!
//! It reports calls ok and failed (failures grouped by kind: connect, timeout, closed, protocol,
//! with the first message of each), turns and turns a second, first-chunk and last-end
//! percentiles, and with `--brain-pid PID` the brain's CPU per turn and its RSS before, at its
//! peak (sampled every 100 ms) and after. `--json` prints all of it as one JSON object (times in
//! ms) and nothing else on stdout. Bounded: every frame wait times out after `--timeout-s` (10 s),
//! no call starts after `--deadline-s` and whatever still runs `--timeout-s` later is cut.
//!
//! With `--relay-listen 127.0.0.1:9000` it plays the Cortex relay instead: start the brain with
//! `--cortex ws://127.0.0.1:9000/agent --api-key x` and every call rides that one connection (same
//! turns, same measurements).
//!
//! With `--idle N --brain-pid PID` it measures memory instead: it reads the brain's RSS and open
//! files, opens `N` started, idle sessions (200 connecting at a time), waits until the RSS is
//! steady, reads both again, closes the sessions and samples the RSS until it stops falling (up to
//! 15 s). It raises its own open-file limit, so `--idle 10000` works from one process:
//!
//! ```text
//! cargo run --release --example load -- --url ws://127.0.0.1:8787 --idle 1000 --brain-pid $(pgrep -f examples/workload)
//! ```
//!
//! With `--soak SECONDS --brain-pid PID` it runs calls that barge in, reset their TCP connection,
//! send junk or stop reading beside ordinary ones, then reports the brain's open files and RSS
//! against its baseline; with `--brain-stats PATH` (the brain's `--stats-file`) also its live tokio
//! tasks and sessions started and ended, and it fails when they differ or the tasks did not return
//! to their baseline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use voqalize::testing::TokenSigner;
use voqalize::wire::{Frame, Response, SessionStart, UserMessage};

/// Load a brain with concurrent calls, hold idle sessions, or soak it; measure it all.
#[derive(Parser, Debug)]
struct Args {
    /// The brain's WebSocket URL (direct leg, `ws://` only).
    #[arg(long, required_unless_present = "relay_listen")]
    url: Option<String>,
    /// Act as the Cortex relay instead: listen here, wait for the agent to dial
    /// (`--cortex ws://ADDR/agent`), and run every call over that one connection.
    #[arg(long, value_name = "ADDR")]
    relay_listen: Option<String>,
    /// How many calls (sessions) in all.
    #[arg(long, visible_alias = "sessions", default_value_t = 200)]
    calls: usize,
    /// How many calls at once. Default: 50 when saturating, every call (`--calls`) when paced
    /// (`--think-ms` or `--ramp-s`).
    #[arg(long)]
    concurrency: Option<usize>,
    /// User turns per call.
    #[arg(long, default_value_t = 3)]
    turns: usize,
    /// Paced: wait this long between the end of a turn and the next user message.
    #[arg(long, default_value_t = 0)]
    think_ms: u64,
    /// Paced: spread the session starts evenly over this many seconds.
    #[arg(long, default_value_t = 0.0)]
    ramp_s: f64,
    /// After a turn's units have all ended, wait this long for another unit of the turn (for
    /// brains that speak several units a turn with gaps between them; 0: the turn is over).
    #[arg(long, default_value_t = 0)]
    quiet_ms: u64,
    /// Sign tokens with this RSA private key (PEM) when the brain verifies them.
    #[arg(long)]
    private_key: Option<std::path::PathBuf>,
    /// Start no call after this many seconds; cut what still runs `--timeout-s` later.
    #[arg(long, default_value_t = 120)]
    deadline_s: u64,
    /// How long to wait for any one frame (or connection) before the call fails as a timeout.
    #[arg(long, default_value_t = 10)]
    timeout_s: u64,
    /// Instead of calls: run a soak for this many seconds (`--concurrency` calls at once, default
    /// 50, that barge in, reset their TCP connection, send junk, or stop reading, beside ordinary
    /// ones), then report the brain's open files, RSS and (with --brain-stats) tasks and sessions
    /// against its baseline (needs --brain-pid).
    #[arg(long, value_name = "SECONDS")]
    soak: Option<u64>,
    /// Instead of calls: hold this many started, idle sessions and report the brain's RSS and
    /// open files (needs --brain-pid).
    #[arg(long, value_name = "N")]
    idle: Option<usize>,
    /// The brain's process id: its CPU time per turn, RSS and open files (from /proc).
    #[arg(long, value_name = "PID")]
    brain_pid: Option<u32>,
    /// The brain's `--stats-file`: live tasks and sessions started/ended, before and after a
    /// soak (the soak fails when they do not come back).
    #[arg(long, value_name = "PATH")]
    brain_stats: Option<std::path::PathBuf>,
    /// Print one JSON object with every number on stdout, and nothing else.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// Paced when there is think time or a ramp.
    fn paced(&self) -> bool {
        self.think_ms > 0 || self.ramp_s > 0.0
    }

    /// `--concurrency`, or its default for the mode.
    fn concurrency(&self) -> usize {
        let default = if self.paced() { self.calls } else { 50 };
        self.concurrency.unwrap_or(default).max(1)
    }

    /// The wait for one frame.
    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s.max(1))
    }
}

// ---------------------------------------------------------------------------------------------
// /proc readings

/// The resident set size of process `pid`, in kB (`VmRSS` of /proc/PID/status).
fn rss_kb(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS line")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("no VmRSS value")?
        .parse()?)
}

/// The CPU time process `pid` has used, in ms (utime + stime of /proc/PID/stat; 100 ticks a second).
fn cpu_ms(pid: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after its closing parenthesis.
    let rest = stat.rsplit_once(')').ok_or("no command name")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).ok_or("no utime")?.parse::<u64>()?
        + fields.get(12).ok_or("no stime")?.parse::<u64>()?;
    Ok(ticks * 10)
}

/// The number of open file descriptors of process `pid`.
fn open_files(pid: u32) -> Result<usize, Box<dyn std::error::Error>> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// Samples the RSS of `pid` every 500 ms until it stops falling: back within 2% of `baseline`,
/// or no new low for 11 s (longer than the examples' 10 s `malloc_trim` period), or `cap` passed.
/// Gives the last reading.
async fn settled_rss(
    pid: u32,
    baseline: u64,
    cap: Duration,
) -> Result<u64, Box<dyn std::error::Error>> {
    let until = Instant::now() + cap;
    let mut low = rss_kb(pid)?;
    let mut last_low = Instant::now();
    let mut now = low;
    while Instant::now() < until
        && last_low.elapsed() < Duration::from_secs(11)
        && now > baseline + baseline / 50
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
        now = rss_kb(pid)?;
        if now < low {
            low = now;
            last_low = Instant::now();
        }
    }
    Ok(now)
}

/// Samples the RSS of `pid` every 200 ms until two readings 1 s apart differ by under 1%, or 10 s
/// passed; gives the last reading.
async fn steady_rss(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
    let until = Instant::now() + Duration::from_secs(10);
    let mut readings = vec![rss_kb(pid)?];
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = rss_kb(pid)?;
        readings.push(now);
        if readings.len() > 5 {
            let then = readings[readings.len() - 6];
            if now.abs_diff(then) * 100 < then.max(1) || Instant::now() >= until {
                return Ok(now);
            }
        }
    }
}

/// Raises the soft limit on open files to the hard limit: every session holds a socket.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: both calls get a pointer to a live, properly aligned `rlimit` on this stack.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                eprintln!("could not raise the open-file limit");
            }
        }
    }
}

/// What the brain's `--stats-file` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BrainStats {
    /// Live tokio tasks in the brain (its stats writer included).
    alive_tasks: u64,
    /// Sessions whose start the brain handled.
    sessions_started: u64,
    /// Sessions whose end the brain handled.
    sessions_ended: u64,
}

impl BrainStats {
    /// Reads the brain's stats file.
    fn read(path: &std::path::Path) -> Result<Self, Box<dyn std::error::Error>> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("{}: no {name}", path.display()))
        };
        Ok(BrainStats {
            alive_tasks: field("alive_tasks")?,
            sessions_started: field("sessions_started")?,
            sessions_ended: field("sessions_ended")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Failures

/// What kind of failure ended a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    /// The TCP connection or the WebSocket handshake failed.
    Connect,
    /// A frame (or the connection) did not come in time, or the run's deadline cut the call.
    Timeout,
    /// The brain closed the connection, ended the call or the socket broke.
    Closed,
    /// The brain sent something this client cannot take (undecodable, a fatal Error, ...).
    Protocol,
}

impl Kind {
    /// The kind's name in reports.
    fn name(self) -> &'static str {
        match self {
            Kind::Connect => "connect",
            Kind::Timeout => "timeout",
            Kind::Closed => "closed",
            Kind::Protocol => "protocol",
        }
    }
}

/// Why a call failed.
#[derive(Debug, Clone)]
struct Failure {
    /// Its kind.
    kind: Kind,
    /// What happened.
    message: String,
}

impl Failure {
    /// A failure of `kind` saying `message`.
    fn new(kind: Kind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

/// Failures grouped by kind: how many, and the first message of each.
#[derive(Default)]
struct Failures {
    /// Kind → (count, first message).
    by_kind: std::collections::BTreeMap<Kind, (usize, String)>,
}

impl Failures {
    /// Counts one failure.
    fn add(&mut self, f: Failure) {
        self.by_kind.entry(f.kind).or_insert((0, f.message)).0 += 1;
    }

    /// How many in all.
    fn total(&self) -> usize {
        self.by_kind.values().map(|(n, _)| n).sum()
    }

    /// `{"connect": {"count": n, "first": "..."}, ...}`.
    fn json(&self) -> serde_json::Value {
        self.by_kind
            .iter()
            .map(|(k, (n, first))| {
                (
                    k.name().to_owned(),
                    serde_json::json!({ "count": n, "first": first }),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// One human line per kind.
    fn print(&self) {
        for (k, (n, first)) in &self.by_kind {
            println!("errors {}: {n} (first: {first})", k.name());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The lean client

/// A small-buffered client WebSocket over TCP.
type Ws = WebSocketStream<TcpStream>;

/// The client's WebSocket configuration: small buffers, so ten thousand connections stay light.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(1024 * 1024)
        .max_message_size(Some(1024 * 1024))
        .max_frame_size(Some(1024 * 1024))
}

/// Connects to the brain at `url` as session `session_id` (the `session_id` query parameter, and
/// a bearer token when one is given).
async fn dial(
    url: &str,
    session_id: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<Ws, Failure> {
    let connect = |e: String| Failure::new(Kind::Connect, format!("{url}: {e}"));
    let uri: tokio_tungstenite::tungstenite::http::Uri =
        url.parse().map_err(|e| connect(format!("{e}")))?;
    let path = match uri.query() {
        Some(q) => format!("{}?{q}&session_id={session_id}", uri.path()),
        None => format!("{}?session_id={session_id}", uri.path()),
    };
    let authority = uri
        .authority()
        .ok_or_else(|| connect("the URL has no host".into()))?;
    let mut request = format!("ws://{authority}{path}")
        .into_client_request()
        .map_err(|e| connect(e.to_string()))?;
    let host = request
        .uri()
        .host()
        .ok_or_else(|| connect("the URL has no host".into()))?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = request.uri().port_u16().unwrap_or(80);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().map_err(
            |e: tokio_tungstenite::tungstenite::http::header::InvalidHeaderValue| {
                connect(e.to_string())
            },
        )?;
        request.headers_mut().insert("authorization", value);
    }
    let handshake = async {
        let stream = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| connect(e.to_string()))?;
        stream
            .set_nodelay(true)
            .map_err(|e| connect(e.to_string()))?;
        let (ws, _) =
            tokio_tungstenite::client_async_with_config(request, stream, Some(ws_config()))
                .await
                .map_err(|e| connect(e.to_string()))?;
        Ok(ws)
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| connect(format!("no connection within {timeout:?}")))?
}

/// The SessionStart of session `session_id` (turn 1, every capability this client handles).
fn session_start(session_id: String) -> Frame {
    use voqalize::wire::Capability;
    Frame::SessionStart(SessionStart {
        session_id,
        turn_id: 1,
        init: Default::default(),
        wire_version: voqalize::wire::WIRE_VERSION,
        capabilities: [Capability::SpeechCancel, Capability::StringConfig]
            .into_iter()
            .collect(),
    })
}

/// One session's leg: a WebSocket of its own, or its share of the relay's one connection.
enum Leg {
    /// A WebSocket of its own.
    Direct(Box<Ws>),
    /// Frames out through the relay link with this prefix, frames in on this channel.
    Relay {
        /// The shared link.
        link: Arc<RelayLink>,
        /// The session's 16-byte prefix.
        prefix: [u8; 16],
        /// Its frames, routed by the link's reader.
        rx: tokio::sync::mpsc::UnboundedReceiver<Frame>,
    },
}

impl Leg {
    /// Sends one frame.
    async fn send(&mut self, frame: &Frame) -> Result<(), Failure> {
        match self {
            Leg::Direct(ws) => ws
                .send(Message::Binary(voqalize::wire::encode(frame).into()))
                .await
                .map_err(|e| Failure::new(Kind::Closed, format!("sending: {e}"))),
            Leg::Relay { link, prefix, .. } => {
                link.send(*prefix, frame);
                Ok(())
            }
        }
    }

    /// Sends raw bytes or text (the soak's junk); only on a direct leg.
    async fn send_raw(&mut self, message: Message) -> Result<(), Failure> {
        match self {
            Leg::Direct(ws) => ws
                .send(message)
                .await
                .map_err(|e| Failure::new(Kind::Closed, format!("sending: {e}"))),
            Leg::Relay { .. } => Ok(()),
        }
    }

    /// The next frame, waiting at most `wait` (`Ok(None)` when that passed).
    async fn recv(&mut self, wait: Duration) -> Result<Option<Frame>, Failure> {
        let next = async {
            match self {
                Leg::Direct(ws) => loop {
                    match ws.next().await {
                        None => {
                            return Err(Failure::new(
                                Kind::Closed,
                                "the brain closed the connection",
                            ));
                        }
                        Some(Err(e)) => return Err(Failure::new(Kind::Closed, e.to_string())),
                        Some(Ok(Message::Binary(bytes))) => match voqalize::wire::decode(&bytes) {
                            Ok(Some(frame)) => return Ok(frame),
                            Ok(None) => continue,
                            Err(e) => return Err(Failure::new(Kind::Protocol, e.to_string())),
                        },
                        Some(Ok(Message::Close(close))) => {
                            return Err(Failure::new(
                                Kind::Closed,
                                format!("the brain closed the connection ({close:?})"),
                            ));
                        }
                        Some(Ok(Message::Text(_))) => {
                            return Err(Failure::new(Kind::Protocol, "a text message"));
                        }
                        // Pings are answered by tungstenite on the next read or write.
                        Some(Ok(_)) => continue,
                    }
                },
                Leg::Relay { rx, .. } => rx
                    .recv()
                    .await
                    .ok_or_else(|| Failure::new(Kind::Closed, "the relay link closed")),
            }
        };
        match tokio::time::timeout(wait, next).await {
            Ok(frame) => frame.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Ends the call: `End`, then (direct) a close handshake, bounded by `wait`.
    async fn end(mut self, wait: Duration) {
        let _ = self.send(&Frame::End).await;
        match self {
            Leg::Direct(mut ws) => {
                let _ = tokio::time::timeout(wait, async {
                    let _ = Ws::close(&mut ws, None).await;
                    while let Some(Ok(_)) = ws.next().await {}
                })
                .await;
            }
            Leg::Relay { link, prefix, .. } => {
                link.routes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&prefix);
            }
        }
    }
}

/// A speech unit being heard.
struct Unit {
    /// The turn it answers.
    turn_id: u64,
    /// Its text so far.
    text: String,
}

/// One session: its leg and its open units.
struct Session {
    /// The connection.
    leg: Leg,
    /// Open units by speech id.
    units: HashMap<u64, Unit>,
    /// Units cut by a barge-in and finalized then, whose end has not come yet.
    cut: std::collections::HashSet<u64>,
    /// The last turn id sent.
    turn_id: u64,
    /// The wait for one frame.
    timeout: Duration,
}

/// When a turn's answer came, counted from its `UserMessage`.
#[derive(Debug, Clone, Copy)]
struct TurnTimes {
    /// The first `SpeechChunk`.
    first_chunk: Duration,
    /// The last `SpeechEnd`.
    last_end: Duration,
}

/// What the client does when the first chunk of the awaited turn comes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnFirstChunk {
    /// Nothing: hear the turn out.
    Listen,
    /// Barge in: interrupt the turn, finalize the cut unit with what was heard, return at once.
    BargeIn,
}

impl Session {
    /// Opens the session: connects (direct) and sends the SessionStart.
    async fn start(leg: Leg, session_id: String, timeout: Duration) -> Result<Self, Failure> {
        let mut s = Session {
            leg,
            units: HashMap::new(),
            cut: Default::default(),
            turn_id: 1,
            timeout,
        };
        s.leg.send(&session_start(session_id)).await?;
        Ok(s)
    }

    /// Sends the next user message and gives its turn id.
    async fn say(&mut self, text: String) -> Result<u64, Failure> {
        self.turn_id += 1;
        let turn_id = self.turn_id;
        self.leg
            .send(&Frame::UserMessage(UserMessage { turn_id, text }))
            .await?;
        Ok(turn_id)
    }

    /// Sends a user message and hears its turn out (or barges in at its first chunk).
    async fn turn(
        &mut self,
        text: String,
        quiet: Duration,
        on_first: OnFirstChunk,
    ) -> Result<TurnTimes, Failure> {
        let sent = Instant::now();
        let turn_id = self.say(text).await?;
        let mut first = None;
        let mut last_end = None;
        let mut quiet_until: Option<Instant> = None;
        loop {
            let wait = match quiet_until {
                Some(t) => t.saturating_duration_since(Instant::now()),
                None => self.timeout,
            };
            let Some(frame) = self.leg.recv(wait).await? else {
                if quiet_until.is_some() {
                    break;
                }
                return Err(Failure::new(
                    Kind::Timeout,
                    format!(
                        "turn {turn_id}: no frame within {:?} ({})",
                        self.timeout,
                        if first.is_some() {
                            "after its first chunk"
                        } else {
                            "no chunk yet"
                        }
                    ),
                ));
            };
            match frame {
                Frame::SpeechStart {
                    speech_id,
                    turn_id: t,
                } => {
                    if t == turn_id {
                        quiet_until = None;
                    }
                    self.units.insert(
                        speech_id,
                        Unit {
                            turn_id: t,
                            text: String::new(),
                        },
                    );
                }
                Frame::SpeechChunk { speech_id, .. } if self.cut.contains(&speech_id) => {}
                Frame::SpeechChunk { speech_id, text } => {
                    let unit = self.units.get_mut(&speech_id).ok_or_else(|| {
                        Failure::new(
                            Kind::Protocol,
                            format!("SpeechChunk for unknown speech {speech_id}"),
                        )
                    })?;
                    unit.text.push_str(&text);
                    if unit.turn_id == turn_id && first.is_none() {
                        first = Some(sent.elapsed());
                        if on_first == OnFirstChunk::BargeIn {
                            let heard = unit.text.clone();
                            self.units.remove(&speech_id);
                            self.cut.insert(speech_id);
                            self.leg
                                .send(&Frame::Interruption {
                                    through_turn: turn_id,
                                })
                                .await?;
                            self.leg
                                .send(&Frame::Finalize {
                                    speech_id,
                                    heard_text: heard,
                                })
                                .await?;
                            let now = sent.elapsed();
                            return Ok(TurnTimes {
                                first_chunk: now,
                                last_end: now,
                            });
                        }
                    }
                }
                Frame::SpeechEnd { speech_id } | Frame::SpeechCancel { speech_id } => {
                    // A unit finalized at a barge-in may still end: it is no longer open.
                    if self.cut.remove(&speech_id) {
                        continue;
                    }
                    let unit = self.units.remove(&speech_id).ok_or_else(|| {
                        Failure::new(
                            Kind::Protocol,
                            format!("the end of unknown speech {speech_id}"),
                        )
                    })?;
                    self.leg
                        .send(&Frame::Finalize {
                            speech_id,
                            heard_text: unit.text,
                        })
                        .await?;
                    if unit.turn_id == turn_id {
                        last_end = Some(sent.elapsed());
                        if !self.units.values().any(|u| u.turn_id == turn_id) {
                            if quiet.is_zero() {
                                break;
                            }
                            quiet_until = Some(Instant::now() + quiet);
                        }
                    }
                }
                Frame::Request { request_id, .. } => {
                    self.leg
                        .send(&Frame::Response(Response {
                            request_id,
                            accepted: true,
                            detail: String::new(),
                            code: None,
                        }))
                        .await?;
                }
                Frame::Error(e) if e.fatal => {
                    return Err(Failure::new(
                        Kind::Protocol,
                        format!("a fatal Error: {:?} {}", e.code, e.message),
                    ));
                }
                Frame::End => {
                    return Err(Failure::new(Kind::Closed, "the brain ended the call"));
                }
                _ => {}
            }
        }
        let first_chunk = first.ok_or_else(|| {
            Failure::new(Kind::Protocol, format!("turn {turn_id} ended without text"))
        })?;
        Ok(TurnTimes {
            first_chunk,
            last_end: last_end.unwrap_or(first_chunk),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The relay stand-in

/// Route table of the relay link: each session's prefix to its frames.
type Routes = std::sync::Mutex<HashMap<[u8; 16], tokio::sync::mpsc::UnboundedSender<Frame>>>;

/// The relay's side of one connection carrying every call: frames out through one writer, frames
/// in routed to each call by its 16-byte prefix.
struct RelayLink {
    /// Bytes to write.
    out: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    /// Where each session's frames go.
    routes: Arc<Routes>,
}

impl RelayLink {
    /// Waits for the agent on `addr` and starts the reader and the writer.
    async fn accept(addr: &str, quiet: bool) -> Result<Arc<Self>, Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        if quiet {
            eprintln!("relay stand-in on ws://{}/agent", listener.local_addr()?);
        } else {
            println!("relay stand-in on ws://{}/agent", listener.local_addr()?);
        }
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let ws = tokio_tungstenite::accept_async(stream).await?;
        let (mut sink, mut stream) = ws.split();
        let (out, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if sink.send(Message::Binary(bytes.into())).await.is_err() {
                    break;
                }
            }
        });
        let link = Arc::new(RelayLink {
            out,
            routes: Default::default(),
        });
        let routes = link.routes.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Binary(bytes) = message else {
                    continue;
                };
                let Some((prefix, envelope)) = bytes.split_first_chunk::<16>() else {
                    continue;
                };
                let Ok(Some(frame)) = voqalize::wire::decode(envelope) else {
                    continue;
                };
                let route = routes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(prefix)
                    .cloned();
                if let Some(route) = route {
                    let _ = route.send(frame);
                }
            }
            // The agent is gone: every session's channel closes.
            routes.lock().unwrap_or_else(|p| p.into_inner()).clear();
        });
        Ok(link)
    }

    /// Sends one frame of session `prefix`.
    fn send(&self, prefix: [u8; 16], frame: &Frame) {
        let mut bytes = prefix.to_vec();
        bytes.extend(voqalize::wire::encode(frame));
        let _ = self.out.send(bytes);
    }

    /// A leg for session number `id`.
    fn leg(self: &Arc<Self>, id: usize) -> Leg {
        let mut prefix = [0u8; 16];
        prefix[..8].copy_from_slice(&(id as u64).to_be_bytes());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(prefix, tx);
        Leg::Relay {
            link: self.clone(),
            prefix,
            rx,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Calls

/// What every call of a run shares.
struct Plan {
    /// The brain's URL (direct).
    url: String,
    /// The relay link (relay).
    relay: Option<Arc<RelayLink>>,
    /// Token signer, when the brain verifies tokens.
    signer: Option<TokenSigner>,
    /// User turns per call.
    turns: usize,
    /// Pause between turns.
    think: Duration,
    /// Extra wait for another unit of a turn.
    quiet: Duration,
    /// The wait for one frame.
    timeout: Duration,
}

impl Plan {
    /// A leg for session `id` (`session_id`): a new connection, or a share of the relay's.
    async fn leg(&self, id: usize, session_id: &str) -> Result<Leg, Failure> {
        match &self.relay {
            Some(link) => Ok(link.leg(id)),
            None => {
                let token = self.signer.as_ref().map(|s| s.mint(session_id));
                Ok(Leg::Direct(Box::new(
                    dial(&self.url, session_id, token.as_deref(), self.timeout).await?,
                )))
            }
        }
    }
}

/// One measured call; gives its turns' times, or the failure and the turns done before it.
async fn one_call(plan: &Plan, id: usize) -> (Vec<TurnTimes>, Option<Failure>) {
    let mut times = Vec::with_capacity(plan.turns);
    let out = async {
        let session_id = format!("load-{id}");
        let leg = plan.leg(id, &session_id).await?;
        let mut s = Session::start(leg, session_id, plan.timeout).await?;
        for t in 0..plan.turns {
            if t > 0 && !plan.think.is_zero() {
                tokio::time::sleep(plan.think).await;
            }
            let text = format!("turn {t} of call {id}");
            times.push(s.turn(text, plan.quiet, OnFirstChunk::Listen).await?);
        }
        s.leg.end(plan.timeout).await;
        Ok::<(), Failure>(())
    }
    .await;
    (times, out.err())
}

/// `p`th percentile of `sorted`, in ms.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// p50, p90, p99 and max of `values` (sorted here), in ms.
fn spread(values: &mut [Duration]) -> [f64; 4] {
    values.sort();
    [50.0, 90.0, 99.0, 100.0].map(|p| percentile(values, p))
}

/// `{"p50": .., "p90": .., "p99": .., "max": ..}`.
fn spread_json(s: [f64; 4]) -> serde_json::Value {
    serde_json::json!({ "p50": s[0], "p90": s[1], "p99": s[2], "max": s[3] })
}

/// Samples the RSS of `pid` every 100 ms and keeps the peak, until dropped.
struct PeakSampler {
    /// The peak so far, in kB.
    peak: Arc<std::sync::atomic::AtomicU64>,
    /// The sampling task.
    task: tokio::task::JoinHandle<()>,
}

impl PeakSampler {
    /// Starts sampling.
    fn start(pid: u32, first: u64) -> Self {
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(first));
        let p = peak.clone();
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(100));
            loop {
                every.tick().await;
                if let Ok(now) = rss_kb(pid) {
                    p.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        PeakSampler { peak, task }
    }

    /// Stops and gives the peak.
    fn stop(self) -> u64 {
        self.task.abort();
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Runs `--calls` measured calls and reports them.
async fn load(args: &Args, signer: Option<TokenSigner>) -> Result<(), Box<dyn std::error::Error>> {
    raise_open_file_limit();
    let relay = match &args.relay_listen {
        Some(addr) => Some(RelayLink::accept(addr, args.json).await?),
        None => None,
    };
    let plan = Arc::new(Plan {
        url: args.url.clone().unwrap_or_default(),
        relay,
        signer,
        turns: args.turns,
        think: Duration::from_millis(args.think_ms),
        quiet: Duration::from_millis(args.quiet_ms),
        timeout: args.timeout(),
    });
    let pid = args.brain_pid;
    let cpu_before = pid.map(|p| cpu_ms(&p.to_string())).transpose()?;
    let own_cpu_before = cpu_ms("self")?;
    let rss_before = pid.map(rss_kb).transpose()?;
    let sampler = pid.zip(rss_before).map(|(p, r)| PeakSampler::start(p, r));

    let concurrency = args.concurrency();
    let gate = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.deadline_s);
    let hard_deadline = deadline + args.timeout();
    let step = if args.ramp_s > 0.0 && args.calls > 0 {
        Duration::from_secs_f64(args.ramp_s / args.calls as f64)
    } else {
        Duration::ZERO
    };
    let mut tasks = tokio::task::JoinSet::new();
    let mut times = Vec::with_capacity(args.calls * args.turns);
    let mut failures = Failures::default();
    let mut ok = 0usize;
    let mut launched = 0usize;
    let mut collect = |(t, f): (Vec<TurnTimes>, Option<Failure>)| {
        times.extend(t);
        match f {
            Some(f) => failures.add(f),
            None => ok += 1,
        }
    };
    for id in 0..args.calls {
        let at = tokio::time::Instant::from_std(started) + step * id as u32;
        tokio::time::sleep_until(at).await;
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        let permit = gate.clone().acquire_owned().await?;
        let plan = plan.clone();
        tasks.spawn(async move {
            let out = one_call(&plan, id).await;
            drop(permit);
            out
        });
        launched += 1;
        while let Some(done) = tasks.try_join_next() {
            collect(done?);
        }
    }
    loop {
        match tokio::time::timeout_at(hard_deadline, tasks.join_next()).await {
            Ok(Some(done)) => collect(done?),
            Ok(None) => break,
            Err(_) => {
                let cut = tasks.len();
                tasks.abort_all();
                for _ in 0..cut {
                    collect((
                        Vec::new(),
                        Some(Failure::new(Kind::Timeout, "cut at the run's deadline")),
                    ));
                }
                break;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let peak = sampler.map(PeakSampler::stop);
    let rss_after = pid.map(rss_kb).transpose()?;
    let cpu_used = match (pid, cpu_before) {
        (Some(p), Some(before)) => Some(cpu_ms(&p.to_string())?.saturating_sub(before)),
        _ => None,
    };
    let own_cpu = cpu_ms("self")?.saturating_sub(own_cpu_before);
    let turns = times.len();
    let mut firsts: Vec<Duration> = times.iter().map(|t| t.first_chunk).collect();
    let mut ends: Vec<Duration> = times.iter().map(|t| t.last_end).collect();
    let first = spread(&mut firsts);
    let end = spread(&mut ends);
    let turns_per_s = turns as f64 / elapsed.max(1e-9);
    let cpu_per_turn = cpu_used.map(|c| c as f64 / turns.max(1) as f64);
    let not_started = args.calls - launched;
    if args.json {
        let out = serde_json::json!({
            "mode": if relay_mode(args) { "relay" } else { "direct" },
            "paced": args.paced(),
            "calls": args.calls,
            "concurrency": concurrency,
            "turns_per_call": args.turns,
            "think_ms": args.think_ms,
            "ramp_s": args.ramp_s,
            "calls_ok": ok,
            "calls_failed": failures.total(),
            "calls_not_started": not_started,
            "errors": failures.json(),
            "seconds": elapsed,
            "turns": turns,
            "turns_per_s": turns_per_s,
            "first_chunk_ms": spread_json(first),
            "last_end_ms": spread_json(end),
            "brain_cpu_ms": cpu_used,
            "brain_cpu_ms_per_turn": cpu_per_turn,
            "brain_rss_kb": { "before": rss_before, "peak": peak, "after": rss_after },
            "load_cpu_ms": own_cpu,
        });
        println!("{out}");
    } else {
        println!(
            "calls: {ok} ok, {} failed{} in {elapsed:.1} s; turns: {turns}, {turns_per_s:.1} a second",
            failures.total(),
            if not_started > 0 {
                format!(", {not_started} not started (deadline)")
            } else {
                String::new()
            }
        );
        failures.print();
        println!(
            "time to first chunk (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            first[0], first[1], first[2], first[3]
        );
        println!(
            "time to last end (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            end[0], end[1], end[2], end[3]
        );
        if let (Some(used), Some(per)) = (cpu_used, cpu_per_turn) {
            println!(
                "brain CPU: {used} ms for {turns} turns, {per:.3} ms a turn (10 ms clock ticks)"
            );
        }
        if let (Some(b), Some(p), Some(a)) = (rss_before, peak, rss_after) {
            println!("brain RSS: {b} kB before, {p} kB peak, {a} kB after");
        }
        println!("load tool CPU: {own_cpu} ms");
    }
    if failures.total() == 0 && not_started == 0 {
        Ok(())
    } else {
        Err(format!(
            "{} calls failed, {not_started} not started",
            failures.total()
        )
        .into())
    }
}

/// True when the run plays the relay.
fn relay_mode(args: &Args) -> bool {
    args.relay_listen.is_some()
}

// ---------------------------------------------------------------------------------------------
// Idle sessions

/// Holds `n` idle sessions open and reports the brain's RSS and open files before, with them,
/// and after.
async fn idle(
    args: &Args,
    n: usize,
    signer: Option<TokenSigner>,
) -> Result<(), Box<dyn std::error::Error>> {
    raise_open_file_limit();
    let pid = args.brain_pid.ok_or("--idle needs --brain-pid")?;
    let url = Arc::new(args.url.clone().ok_or("--idle needs --url")?);
    let (rss_before, files_before) = (rss_kb(pid)?, open_files(pid)?);
    let timeout = args.timeout();
    let signer = Arc::new(signer);
    let (close_tx, close_rx) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    // Connect 200 at a time; each open session then lives in a task that reads (answering the
    // brain's pings) until told to close.
    let opened = futures_util::stream::iter(0..n)
        .map(|id| {
            let (url, signer) = (url.clone(), signer.clone());
            async move {
                let session_id = format!("idle-{id}");
                let token = signer.as_ref().as_ref().map(|s| s.mint(&session_id));
                let mut ws = dial(&url, &session_id, token.as_deref(), timeout).await?;
                ws.send(Message::Binary(
                    voqalize::wire::encode(&session_start(session_id)).into(),
                ))
                .await
                .map_err(|e| Failure::new(Kind::Closed, format!("sending: {e}")))?;
                Ok::<Ws, Failure>(ws)
            }
        })
        .buffer_unordered(200)
        .collect::<Vec<_>>()
        .await;
    let open_s = started.elapsed().as_secs_f64();
    let mut failures = Failures::default();
    let mut holders = tokio::task::JoinSet::new();
    for ws in opened {
        match ws {
            Err(f) => failures.add(f),
            Ok(mut ws) => {
                let mut close = close_rx.clone();
                holders.spawn(async move {
                    loop {
                        tokio::select! {
                            _ = close.changed() => break,
                            m = ws.next() => match m {
                                Some(Ok(_)) => continue,
                                _ => return false,
                            },
                        }
                    }
                    let _ = ws
                        .send(Message::Binary(voqalize::wire::encode(&Frame::End).into()))
                        .await;
                    let _ = tokio::time::timeout(Duration::from_secs(2), async {
                        let _ = ws.close(None).await;
                        while let Some(Ok(_)) = ws.next().await {}
                    })
                    .await;
                    true
                });
            }
        }
    }
    let held = holders.len();
    let rss_with = steady_rss(pid).await?;
    let files_with = open_files(pid)?;
    let _ = close_tx.send(true);
    let mut dropped_early = 0usize;
    while let Some(done) = holders.join_next().await {
        if !done? {
            dropped_early += 1;
        }
    }
    let rss_after = settled_rss(pid, rss_before, Duration::from_secs(15)).await?;
    let files_after = open_files(pid)?;
    let per_session = rss_with.saturating_sub(rss_before) as f64 / held.max(1) as f64;
    if args.json {
        let out = serde_json::json!({
            "mode": "idle",
            "sessions": n,
            "sessions_open": held,
            "sessions_failed": failures.total(),
            "sessions_closed_by_brain": dropped_early,
            "errors": failures.json(),
            "open_s": open_s,
            "brain_rss_kb": { "before": rss_before, "with": rss_with, "after": rss_after },
            "kb_per_session": per_session,
            "brain_open_files": { "before": files_before, "with": files_with, "after": files_after },
        });
        println!("{out}");
    } else {
        println!(
            "idle sessions: {held} open in {open_s:.1} s, {} failed, {dropped_early} closed by the brain before the end",
            failures.total()
        );
        failures.print();
        println!(
            "brain open files: {files_before} before, {files_with} with the sessions, {files_after} after"
        );
        println!(
            "brain RSS: {rss_before} kB idle, {rss_with} kB with {held} idle sessions ({per_session:.1} kB a session), {rss_after} kB after they closed"
        );
    }
    if failures.total() == 0 {
        Ok(())
    } else {
        Err(format!("{} sessions failed to open", failures.total()).into())
    }
}

// ---------------------------------------------------------------------------------------------
// Soak

/// One soak call: what it does is chosen by `kind`. Errors are expected (the brain may close a
/// misbehaving call); they are counted, but only the brain's health at the end counts.
async fn soak_call(url: &str, id: usize, kind: u64, timeout: Duration) -> Result<(), Failure> {
    let session_id = format!("soak-{id}");
    let leg = Leg::Direct(Box::new(dial(url, &session_id, None, timeout).await?));
    let mut s = Session::start(leg, session_id, timeout).await?;
    let quiet = Duration::ZERO;
    match kind % 5 {
        // An ordinary call.
        0 => {
            s.turn("an ordinary turn".into(), quiet, OnFirstChunk::Listen)
                .await?;
            s.leg.end(timeout).await;
        }
        // A barge-in on the answer: interrupted at its first chunk, then a new message.
        1 => {
            s.turn("interrupt me".into(), quiet, OnFirstChunk::BargeIn)
                .await?;
            s.turn("after the barge-in".into(), quiet, OnFirstChunk::Listen)
                .await?;
            s.leg.end(timeout).await;
        }
        // A TCP reset: the connection just goes away, no close frame.
        2 => {
            s.say("going away".into()).await?;
            if let Leg::Direct(ws) = &s.leg {
                let _ = ws.get_ref().set_zero_linger();
            }
            drop(s);
        }
        // Junk frames, then an ordinary turn.
        3 => {
            for i in 0..20u8 {
                s.leg
                    .send_raw(Message::Binary(vec![0xff, i, 0x07].into()))
                    .await?;
                s.leg.send_raw(Message::Text("not a frame".into())).await?;
            }
            s.turn("after the junk".into(), quiet, OnFirstChunk::Listen)
                .await?;
            s.leg.end(timeout).await;
        }
        // A client that stops reading: messages sent, nothing read, then gone.
        _ => {
            for t in 0..50 {
                s.say(format!("flood {t}")).await?;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(s);
        }
    }
    Ok(())
}

/// Runs the soak and reports the brain's files, memory, tasks and sessions against its baseline.
async fn soak(args: &Args, seconds: u64) -> Result<(), Box<dyn std::error::Error>> {
    raise_open_file_limit();
    let pid = args.brain_pid.ok_or("--soak needs --brain-pid")?;
    let url = args.url.clone().ok_or("--soak needs --url")?;
    let stats_before = args
        .brain_stats
        .as_deref()
        .map(BrainStats::read)
        .transpose()?;
    let (files, rss) = (open_files(pid)?, rss_kb(pid)?);
    let timeout = args.timeout();
    let gate = Arc::new(Semaphore::new(args.concurrency.unwrap_or(50).max(1)));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    let mut id = 0usize;
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos() as u64
        | 1;
    let mut failures = Failures::default();
    let mut ok = 0usize;
    let mut count = |r: Result<(), Failure>| match r {
        Ok(()) => ok += 1,
        Err(f) => failures.add(f),
    };
    while Instant::now() < deadline {
        let permit = gate.clone().acquire_owned().await?;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let (url, kind) = (url.clone(), rng);
        id += 1;
        tasks.spawn(async move {
            let out = soak_call(&url, id, kind, timeout).await;
            drop(permit);
            out
        });
        while let Some(done) = tasks.try_join_next() {
            count(done?);
        }
    }
    while let Some(done) = tasks.join_next().await {
        count(done?);
    }
    // Let the brain finish tearing down what was cut, then read.
    let rss_after = settled_rss(pid, rss, Duration::from_secs(20)).await?;
    let files_after = open_files(pid)?;
    // The sessions' ends and tasks: poll the stats file (written every 500 ms) for up to 10 s more.
    let mut stats_after = None;
    if let (Some(path), Some(before)) = (&args.brain_stats, stats_before) {
        // The file is rewritten every 500 ms: wait for one written after the last call.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let now = BrainStats::read(path)?;
            stats_after = Some(now);
            let settled =
                now.sessions_started == now.sessions_ended && now.alive_tasks <= before.alive_tasks;
            if settled || Instant::now() >= until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let mut problems = Vec::new();
    if let (Some(b), Some(a)) = (stats_before, stats_after) {
        if a.sessions_started != a.sessions_ended {
            problems.push(format!(
                "sessions started {} but ended {}",
                a.sessions_started, a.sessions_ended
            ));
        }
        if a.alive_tasks > b.alive_tasks {
            problems.push(format!(
                "brain tasks {} after, {} before",
                a.alive_tasks, b.alive_tasks
            ));
        }
    }
    if args.json {
        let stats = |s: Option<BrainStats>| {
            s.map(|s| {
                serde_json::json!({
                    "alive_tasks": s.alive_tasks,
                    "sessions_started": s.sessions_started,
                    "sessions_ended": s.sessions_ended,
                })
            })
        };
        let out = serde_json::json!({
            "mode": "soak",
            "seconds": seconds,
            "calls": id,
            "calls_ok": ok,
            "calls_failed": failures.total(),
            "errors": failures.json(),
            "brain_open_files": { "before": files, "after": files_after },
            "brain_rss_kb": { "before": rss, "after": rss_after },
            "brain_stats": { "before": stats(stats_before), "after": stats(stats_after) },
            "problems": problems,
        });
        println!("{out}");
    } else {
        println!(
            "soak: {id} calls in {seconds} s ({ok} without error, {} with one: expected, as the brain cuts misbehaving calls)",
            failures.total()
        );
        failures.print();
        println!(
            "brain open files {files} before, {files_after} after; RSS {rss} kB before, {rss_after} kB after"
        );
        if let (Some(b), Some(a)) = (stats_before, stats_after) {
            println!(
                "brain tasks {} before, {} after; sessions started {} ended {} ({} before the soak)",
                b.alive_tasks,
                a.alive_tasks,
                a.sessions_started,
                a.sessions_ended,
                b.sessions_started
            );
        }
        for p in &problems {
            println!("problem: {p}");
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args).await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Runs the mode the flags ask for.
async fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let signer = match &args.private_key {
        Some(path) => Some(TokenSigner::from_pem(&std::fs::read_to_string(path)?)?),
        None => None,
    };
    if let Some(n) = args.idle {
        return idle(args, n, signer).await;
    }
    if let Some(seconds) = args.soak {
        return soak(args, seconds).await;
    }
    load(args, signer).await
}
