//! [`HostBuilder`]: one way to configure a host, on either leg. The design is in the `host`
//! module's doc ("Configuring a host").

use std::time::Duration;

use super::{HostError, HostOptions, Load, Shutdown, SocketLimits, auth};
use crate::runtime::Limits;

/// Builds the options of a host: a [`HostOptions`] for the direct leg
/// ([`HostOptions::builder`]), or a `Relay` (`Relay::builder`, feature `relay`). Setters never
/// fail; `build()` checks the whole and names what is wrong. `L` is the leg: [`Direct`] or
/// `RelayLeg`, each with settings of its own.
///
/// A setting the leg has not is no method of its builder:
///
/// ```compile_fail
/// # use voqalize::host::Load;
/// # let load = Load::from_fn(|| 0.0);
/// // The relay routes each call itself: it follows no load.
/// let relay = voqalize::relay::Relay::builder("wss://cortex.example/agent", "v1")
///     .api_key("key")
///     .load(&load)
///     .build();
/// ```
#[must_use]
pub struct HostBuilder<L = Direct> {
    pub(crate) limits: Limits,
    pub(crate) socket: SocketLimits,
    pub(crate) max_sessions: Option<usize>,
    pub(crate) keepalive: Option<(Duration, Duration)>,
    pub(crate) shutdown: Option<Shutdown>,
    pub(crate) recorder: Option<crate::record::Recorder>,
    pub(crate) leg: L,
}

/// The direct leg's own settings in a [`HostBuilder`]: which keys verify the upgrade's token and
/// the load that refuses calls.
#[derive(Default)]
pub struct Direct {
    /// `Some`: exactly these PEMs instead of the production key.
    keys: Option<Vec<String>>,
    /// PEMs trusted besides.
    extra: Vec<String>,
    unverified: bool,
    load: Option<Load>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("keys", &self.keys.as_ref().map(Vec::len))
            .field("extra", &self.extra.len())
            .field("unverified", &self.unverified)
            .field("load", &self.load)
            .finish()
    }
}

impl<L> HostBuilder<L> {
    /// A builder for `leg`, every shared setting at its default.
    pub(crate) fn with_leg(leg: L) -> Self {
        HostBuilder {
            limits: super::default_limits(),
            socket: SocketLimits::default(),
            max_sessions: None,
            keepalive: None,
            shutdown: None,
            recorder: None,
            leg,
        }
    }

    /// Follows `shutdown`: once it is triggered, new calls are refused (direct leg: `503` with
    /// `Retry-After` at the upgrade, a call given to [`run_session`](super::run_session) directly
    /// closed with 1013; relay leg: each `SessionStart` answered with its `End`) and the running
    /// ones drain, then end with `End` when its drain timeout passes (see [`Shutdown`]).
    pub fn shutdown(mut self, shutdown: &Shutdown) -> Self {
        self.shutdown = Some(shutdown.clone());
        self
    }

    /// Records calls with `recorder` (every call, or one in [`Recorder::every`]): each frame in
    /// and out, each model request and its response, each tool call, written when the call ends
    /// (see [`crate::record`]). Default: nothing is recorded.
    ///
    /// [`Recorder::every`]: crate::record::Recorder::every
    pub fn record(mut self, recorder: crate::record::Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// At most `n` calls hosted at once by one server (at least 1): one [`serve`](super::serve),
    /// one `axum::brain_route`, or one `Relay` and its clones. Direct leg: no cap by default; a
    /// connection beyond it is refused at the upgrade with HTTP 503, at once. Relay leg: 10,000
    /// by default (an idle call costs about 8 kB); a `SessionStart` beyond it is answered with
    /// that session's `End` at once, as one during the drain.
    pub fn max_sessions(mut self, n: usize) -> Self {
        self.max_sessions = Some(n.max(1));
        self
    }

    /// The leg's liveness: a WebSocket Ping every `ping_interval` (default 20 s, at least 10 ms),
    /// and `pong_timeout` (default 20 s) to hear anything back.
    ///
    /// Direct leg: each call pings its peer, and a call whose peer sends nothing, a Pong or a
    /// frame, for `ping_interval + pong_timeout` ends (a half-open connection: `on_session_end`
    /// runs). Relay leg: the relay connection pings (`pong_timeout` at least 10 ms), and is lost
    /// when the relay sends nothing for `ping_interval + pong_timeout` or takes none of a batch
    /// of bytes for `pong_timeout`; every call on it ends and the relay is redialled. Calls on
    /// the relay run no deadline of their own: a silent caller stays up. Both legs' sockets also
    /// have TCP keepalive (probes after 30 s of silence, every 10 s).
    pub fn keepalive(mut self, ping_interval: Duration, pong_timeout: Duration) -> Self {
        self.keepalive = Some((ping_interval, pong_timeout));
        self
    }

    /// The bound of each bulk lane, inbound and outbound (default 256; 0 means 256).
    pub fn max_lane_frames(mut self, frames: usize) -> Self {
        self.limits.max_lane_frames = if frames == 0 { 256 } else { frames };
        self
    }

    /// How many turns of one call may run at once (default 4, at least 1). A `UserMessage` or
    /// `UserIdle` past it waits for a running turn to end (a barge-in ends them at once), and the
    /// frames behind it wait on the inbound lane, within its bounds: a peer that sends a hundred
    /// messages at once cannot run a hundred turns, each a model request, at once. A warning is
    /// logged once, then counted.
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.limits.max_turns = turns.max(1);
        self
    }

    /// The bound of each bulk lane in bytes, inbound and outbound (default 2 MiB, at least 64 KiB):
    /// a frame count is no bound when one frame can be a megabyte. Past it `SpeechChunk`s and
    /// RTVI frames are shed as past [`max_lane_frames`](Self::max_lane_frames) (one `OVERLOAD` per
    /// episode); past twice it any frame overflows and the call ends (docs/protocol.md §3.3). A
    /// lane counts each frame's text and JSON payloads; a turn's frames weigh a few kilobytes.
    pub fn max_lane_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_lane_bytes = bytes.max(64 * 1024);
        self
    }

    /// How long `configure` and `cancel_speech` wait for Voqalize's answer (default 10 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.limits.request_timeout = timeout;
        self
    }

    /// The largest JSON text a frame may carry in `SessionStart.init` or RTVI `data`, in bytes
    /// (default 64 KiB), checked before it is parsed. A bigger `init` refuses the session
    /// (fatal `PROTOCOL`, `End`); bigger RTVI data is skipped with a log line.
    pub fn max_json_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_json = bytes;
        self
    }

    /// The largest WebSocket message (and frame) accepted or sent, in bytes (default 1 MiB, at
    /// least 1 KiB; the limit Voqalize's own client uses, and the largest legitimate frame is far
    /// below it). A bigger inbound message ends the call and closes the connection with 1009.
    /// The brain never sends a bigger one: speech is split into chunks
    /// ([`max_chunk_bytes`](Self::max_chunk_bytes)), step names are cut, `send_rtvi` refuses data
    /// that would not fit, and any other frame the brain builds over it ends the call with
    /// `Error{INTERNAL, fatal}`, `End` and close 1011 instead of being sent (docs/protocol.md §3.2).
    /// On the relay leg it bounds each call's messages after the demux: a bigger one ends that call
    /// only, with its `End` (`frame_headroom` sizes the shared socket's own limit).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.socket.max_message = bytes.max(1024);
        self.limits.max_frame = self.socket.max_message;
        self
    }

    /// The most bytes of text one `SpeechChunk` carries (default 16 KiB; at least 4, one character
    /// of any width, and at most the message limit less 64 bytes of a frame's own). A longer write
    /// to a speech unit (a model's text delta can be of any length) goes out as several chunks,
    /// cut at character boundaries, in order: their concatenation is the text written.
    pub fn max_chunk_bytes(mut self, bytes: usize) -> Self {
        self.limits.chunk_bytes = bytes;
        self
    }

    /// How many bytes may wait unsent for one call (default 1 MiB). Direct leg: for a peer that
    /// does not read (Pongs included): past it the write fails and the call ends, instead of
    /// buffering forever. Relay leg (at least 64 KiB): the call's bytes waiting for the shared
    /// socket: past it that call's writer waits (a single bigger frame fails its send and the
    /// call ends, with its `End`).
    pub fn max_write_backlog_bytes(mut self, bytes: usize) -> Self {
        self.socket.max_write_backlog = bytes;
        self
    }
}

impl HostBuilder<Direct> {
    /// Trusts exactly these PEM public keys (SPKI `BEGIN PUBLIC KEY` or PKCS#1), tried in order,
    /// instead of the production key. Blank entries are ignored. Checked by
    /// [`build`](Self::build): [`HostError::BadKey`] for an unreadable key, [`HostError::NoKeys`]
    /// when none remains.
    pub fn public_keys<I, S>(mut self, pems: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.leg.keys = Some(
            pems.into_iter()
                .map(|p| p.as_ref().to_owned())
                .filter(|p| !p.trim().is_empty())
                .collect(),
        );
        self
    }

    /// Trusts this PEM public key besides those already trusted (the production key, or
    /// [`public_keys`](Self::public_keys)). Checked by [`build`](Self::build):
    /// [`HostError::BadKey`] for an unreadable key.
    pub fn trust_public_key(mut self, pem: &str) -> Self {
        self.leg.extra.push(pem.to_owned());
        self
    }

    /// Accepts every connection without checking a token. For development only: anyone who can
    /// reach the socket can open a call. Log lines then carry no tenant or agent id. An upgrade
    /// that carries an `Origin` header is still refused (403): browsers send one with every
    /// WebSocket, Voqalize never does, so a web page open in your browser cannot call a
    /// development brain on your machine. With a key given too, [`build`](Self::build) fails
    /// with [`HostError::Conflict`].
    pub fn allow_unverified(mut self) -> Self {
        self.leg.unverified = true;
        self
    }

    /// Refuses new calls while `load` is above its threshold: the upgrade is answered `503` with
    /// `Retry-After`, so a load balancer sends the call to another process (give the same `load`
    /// to [`Health::load`](super::Health::load) and readiness turns false too). Read once per
    /// upgrade. Default: no load admission. (The relay leg has no such setting: the relay routes
    /// each call itself.)
    pub fn load(mut self, load: &Load) -> Self {
        self.leg.load = Some(load.clone());
        self
    }

    /// How long after the upgrade a peer has to send `SessionStart` before the connection is
    /// closed (default 10 s), so idle sockets cannot hold the process's file descriptors.
    pub fn session_start_timeout(mut self, timeout: Duration) -> Self {
        self.limits.start_timeout = timeout;
        self
    }

    /// The WebSocket read and write buffer sizes per connection, in bytes (default 512 read, 0
    /// write). Voqalize's frames are small: a `UserMessage` or a `Finalize` fits in one 512-byte
    /// read, a longer one takes a few, and large buffers only cost memory per call
    /// (tokio-tungstenite's 128 KiB defaults were most of a session's memory). The write buffer
    /// can stay 0: the writer flushes once per batch of ready frames, and [`serve`](super::serve)
    /// keeps a batch's bytes until that flush (docs/protocol.md §2.1). Behind axum each frame
    /// is written as it is fed unless the write buffer holds a batch: a few KiB there trade that
    /// much memory per speaking call for one `write` per batch.
    pub fn socket_buffers(mut self, read: usize, write: usize) -> Self {
        self.socket.read_buffer = read.max(256);
        self.socket.write_buffer = write;
        self
    }

    /// The options, checked.
    ///
    /// # Errors
    /// [`HostError::BadKey`] for an unreadable key; [`HostError::NoKeys`] when
    /// [`public_keys`](Self::public_keys) left none; [`HostError::Conflict`] naming
    /// `allow_unverified` when a key was given too.
    pub fn build(self) -> Result<HostOptions, HostError> {
        let Direct {
            keys,
            extra,
            unverified,
            load,
        } = self.leg;
        let verifier = if unverified {
            if keys.is_some() || !extra.is_empty() {
                return Err(HostError::Conflict {
                    setting: "allow_unverified",
                    why: "public keys were given too: drop one or the other",
                });
            }
            auth::Verifier::Unverified
        } else {
            let mut trusted = match keys {
                Some(pems) => pems
                    .iter()
                    .map(|p| auth::parse_key(p))
                    .collect::<Result<Vec<_>, _>>()?,
                None => vec![auth::parse_key(super::PRODUCTION_PUBLIC_KEY)?],
            };
            for pem in &extra {
                trusted.push(auth::parse_key(pem)?);
            }
            if trusted.is_empty() {
                return Err(HostError::NoKeys);
            }
            auth::Verifier::Keys(trusted)
        };
        let mut limits = self.limits;
        if let Some((ping_interval, pong_timeout)) = self.keepalive {
            limits.ping_interval = ping_interval.max(Duration::from_millis(10));
            limits.pong_timeout = pong_timeout;
        }
        Ok(HostOptions {
            verifier,
            limits,
            socket: self.socket,
            max_sessions: self.max_sessions,
            shutdown: self.shutdown,
            load,
            recorder: self.recorder,
            tool_watch: None,
            turn_watch: None,
        })
    }
}
