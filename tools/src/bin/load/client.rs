//! The lean client: one small-buffered WebSocket (or a share of the relay link) per session,
//! frames encoded and decoded with `voqalize::wire`, only timings kept.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use voqalize::wire::{Frame, Response, SessionStart, UserMessage};

use crate::failure::{Failure, Kind};
use crate::relay::RelayLink;

/// A small-buffered client WebSocket over TCP.
pub type Ws = WebSocketStream<TcpStream>;

/// The client's WebSocket configuration: small buffers, so ten thousand connections stay light.
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(1024 * 1024)
        .max_message_size(Some(1024 * 1024))
        .max_frame_size(Some(1024 * 1024))
}

/// Connects to the brain at `url` as session `session_id` (the `session_id` query parameter, and
/// a bearer token when one is given).
pub async fn dial(
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
pub fn session_start(session_id: String) -> Frame {
    use voqalize::wire::Capability;
    Frame::SessionStart(
        SessionStart::new(session_id, 1)
            .with_init(Default::default())
            .with_wire_version(voqalize::wire::WIRE_VERSION)
            .with_capabilities(
                [Capability::SpeechCancel, Capability::StringConfig]
                    .into_iter()
                    .collect(),
            ),
    )
}

/// How long one send may wait for the brain to take it (a brain that stops reading fills the
/// socket's buffers).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends one message, waiting at most [`SEND_TIMEOUT`].
pub async fn send_bounded(ws: &mut Ws, message: Message) -> Result<(), Failure> {
    match tokio::time::timeout(SEND_TIMEOUT, ws.send(message)).await {
        Ok(sent) => sent.map_err(|e| Failure::new(Kind::Closed, format!("sending: {e}"))),
        Err(_) => Err(Failure::new(
            Kind::Timeout,
            format!("the brain took no frame for {SEND_TIMEOUT:?}"),
        )),
    }
}

/// One session's leg: a WebSocket of its own, or its share of the relay's one connection.
pub enum Leg {
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
    pub async fn send(&mut self, frame: &Frame) -> Result<(), Failure> {
        match self {
            Leg::Direct(ws) => {
                send_bounded(ws, Message::Binary(voqalize::wire::encode(frame).into())).await
            }
            Leg::Relay { link, prefix, .. } => {
                link.send(*prefix, frame);
                Ok(())
            }
        }
    }

    /// Sends raw bytes or text (the soak's junk); only on a direct leg.
    pub async fn send_raw(&mut self, message: Message) -> Result<(), Failure> {
        match self {
            Leg::Direct(ws) => send_bounded(ws, message).await,
            Leg::Relay { .. } => Ok(()),
        }
    }

    /// The next frame, waiting at most `wait` (`Ok(None)` when that passed).
    pub async fn recv(&mut self, wait: Duration) -> Result<Option<Frame>, Failure> {
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
    pub async fn end(mut self, wait: Duration) {
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
pub struct Unit {
    /// The turn it answers.
    pub turn_id: u64,
    /// Its text so far.
    pub text: String,
}

/// One session: its leg and its open units.
pub struct Session {
    /// The connection.
    pub leg: Leg,
    /// Open units by speech id.
    pub units: HashMap<u64, Unit>,
    /// Units cut by a barge-in and finalized then, whose end has not come yet.
    pub cut: std::collections::HashSet<u64>,
    /// The last turn id sent.
    pub turn_id: u64,
    /// The wait for one frame.
    pub timeout: Duration,
}

/// When a turn's answer came, counted from its `UserMessage`.
#[derive(Debug, Clone, Copy)]
pub struct TurnTimes {
    /// The first `SpeechChunk`.
    pub first_chunk: Duration,
    /// The last `SpeechEnd`.
    pub last_end: Duration,
    /// From the moment the stand-in provider wrote the answer's first event to the moment the
    /// first `SpeechChunk` came here, when the chunk carries that moment (`provider --stamp`: the
    /// first word, in ns since the Unix epoch; both read the system clock).
    pub sse_to_chunk: Option<Duration>,
}

/// The provider's stamp at the head of a chunk's text (`provider --stamp`), as the time since it:
/// a number of 19 digits (ns since the Unix epoch, until 2286) and a space.
fn stamp_delay(text: &str) -> Option<Duration> {
    let digits = text
        .get(..19)
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))?;
    if text.as_bytes().get(19) != Some(&b' ') {
        return None;
    }
    let stamped: u128 = digits.parse().ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    u64::try_from(now.checked_sub(stamped)?)
        .ok()
        .map(Duration::from_nanos)
}

/// What the client does when the first chunk of the awaited turn comes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OnFirstChunk {
    /// Nothing: hear the turn out.
    Listen,
    /// Barge in: interrupt the turn, finalize the cut unit with what was heard, return at once.
    BargeIn,
}

impl Session {
    /// Opens the session: connects (direct) and sends the SessionStart.
    pub async fn start(leg: Leg, session_id: String, timeout: Duration) -> Result<Self, Failure> {
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
    pub async fn say(&mut self, text: String) -> Result<u64, Failure> {
        self.turn_id += 1;
        let turn_id = self.turn_id;
        self.leg
            .send(&Frame::UserMessage(UserMessage::new(turn_id, text)))
            .await?;
        Ok(turn_id)
    }

    /// Sends a user message and hears its turn out (or barges in at its first chunk).
    ///
    /// The hot loop of every measured turn: its steps below are plain functions (no await, no
    /// allocation of their own); each frame's awaits are the sends written here.
    pub async fn turn(
        &mut self,
        text: String,
        quiet: Duration,
        on_first: OnFirstChunk,
    ) -> Result<TurnTimes, Failure> {
        let sent = Instant::now();
        let turn_id = self.say(text).await?;
        let mut clock = TurnClock::new(turn_id, sent);
        loop {
            let Some(frame) = self.leg.recv(clock.wait(self.timeout)).await? else {
                if clock.quiet_until.is_some() {
                    break;
                }
                return Err(clock.no_frame(self.timeout));
            };
            match frame {
                Frame::SpeechStart {
                    speech_id,
                    turn_id: t,
                } => self.open_unit(&mut clock, speech_id, t),
                Frame::SpeechChunk { speech_id, .. } if self.cut.contains(&speech_id) => {}
                Frame::SpeechChunk { speech_id, text } => {
                    let first = self.hear_chunk(&mut clock, speech_id, &text)?;
                    if first && on_first == OnFirstChunk::BargeIn {
                        let heard_text = self.cut_unit(speech_id);
                        self.leg
                            .send(&Frame::Interruption {
                                through_turn: turn_id,
                            })
                            .await?;
                        self.leg
                            .send(&Frame::Finalize {
                                speech_id,
                                heard_text,
                            })
                            .await?;
                        return Ok(clock.barged());
                    }
                }
                Frame::SpeechEnd { speech_id } | Frame::SpeechCancel { speech_id } => {
                    // A unit finalized at a barge-in may still end: it is no longer open.
                    let Some(unit) = self.close_unit(speech_id)? else {
                        continue;
                    };
                    let ours = unit.turn_id == turn_id;
                    self.leg
                        .send(&Frame::Finalize {
                            speech_id,
                            heard_text: unit.text,
                        })
                        .await?;
                    if ours && self.unit_ended(&mut clock, quiet) {
                        break;
                    }
                }
                Frame::Request { request_id, .. } => {
                    self.leg
                        .send(&Frame::Response(Response::new(
                            request_id,
                            true,
                            String::new(),
                            None,
                        )))
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
        clock.finish()
    }

    /// A `SpeechStart`: the unit opens (and the awaited turn's quiet wait, if any, is off).
    fn open_unit(&mut self, clock: &mut TurnClock, speech_id: u64, turn_id: u64) {
        if turn_id == clock.turn_id {
            clock.quiet_until = None;
        }
        self.units.insert(
            speech_id,
            Unit {
                turn_id,
                text: String::new(),
            },
        );
    }

    /// A `SpeechChunk` of an open unit: its text is heard; true when it is the awaited turn's
    /// first chunk (then timed, with the provider's stamp if it carries one).
    fn hear_chunk(
        &mut self,
        clock: &mut TurnClock,
        speech_id: u64,
        text: &str,
    ) -> Result<bool, Failure> {
        let unit = self.units.get_mut(&speech_id).ok_or_else(|| {
            Failure::new(
                Kind::Protocol,
                format!("SpeechChunk for unknown speech {speech_id}"),
            )
        })?;
        unit.text.push_str(text);
        if unit.turn_id == clock.turn_id && clock.first.is_none() {
            clock.first = Some(clock.sent.elapsed());
            clock.sse_to_chunk = stamp_delay(text);
            return Ok(true);
        }
        Ok(false)
    }

    /// Cuts a unit at a barge-in: it is no longer open, its end is still to come; gives what was
    /// heard of it.
    fn cut_unit(&mut self, speech_id: u64) -> String {
        let heard = self
            .units
            .remove(&speech_id)
            .map(|u| u.text)
            .unwrap_or_default();
        self.cut.insert(speech_id);
        heard
    }

    /// A `SpeechEnd` or `SpeechCancel`: the open unit it closes, to finalize; None for a unit cut
    /// at a barge-in (finalized then).
    fn close_unit(&mut self, speech_id: u64) -> Result<Option<Unit>, Failure> {
        if self.cut.remove(&speech_id) {
            return Ok(None);
        }
        self.units.remove(&speech_id).map(Some).ok_or_else(|| {
            Failure::new(
                Kind::Protocol,
                format!("the end of unknown speech {speech_id}"),
            )
        })
    }

    /// A unit of the awaited turn has ended and been finalized: times it; true when the turn is
    /// over (no unit of it open, and no `quiet` wait for another).
    fn unit_ended(&self, clock: &mut TurnClock, quiet: Duration) -> bool {
        clock.last_end = Some(clock.sent.elapsed());
        if self.units.values().any(|u| u.turn_id == clock.turn_id) {
            return false;
        }
        if quiet.is_zero() {
            return true;
        }
        clock.quiet_until = Some(Instant::now() + quiet);
        false
    }
}

/// The awaited turn's times, as its frames come.
struct TurnClock {
    turn_id: u64,
    /// When its `UserMessage` went.
    sent: Instant,
    first: Option<Duration>,
    sse_to_chunk: Option<Duration>,
    last_end: Option<Duration>,
    /// While set, the end of the wait for another unit of the turn (`--quiet-ms`).
    quiet_until: Option<Instant>,
}

impl TurnClock {
    fn new(turn_id: u64, sent: Instant) -> Self {
        TurnClock {
            turn_id,
            sent,
            first: None,
            sse_to_chunk: None,
            last_end: None,
            quiet_until: None,
        }
    }

    /// The wait for the next frame: to the end of the quiet wait, or `timeout`.
    fn wait(&self, timeout: Duration) -> Duration {
        match self.quiet_until {
            Some(t) => t.saturating_duration_since(Instant::now()),
            None => timeout,
        }
    }

    /// No frame came within `timeout`.
    fn no_frame(&self, timeout: Duration) -> Failure {
        Failure::new(
            Kind::Timeout,
            format!(
                "turn {}: no frame within {timeout:?} ({})",
                self.turn_id,
                if self.first.is_some() {
                    "after its first chunk"
                } else {
                    "no chunk yet"
                }
            ),
        )
    }

    /// The times of a turn cut at its first chunk: both now.
    fn barged(&self) -> TurnTimes {
        let now = self.sent.elapsed();
        TurnTimes {
            first_chunk: now,
            last_end: now,
            sse_to_chunk: self.sse_to_chunk,
        }
    }

    /// The times of a turn heard out (an error if it brought no text).
    fn finish(self) -> Result<TurnTimes, Failure> {
        let first_chunk = self.first.ok_or_else(|| {
            Failure::new(
                Kind::Protocol,
                format!("turn {} ended without text", self.turn_id),
            )
        })?;
        Ok(TurnTimes {
            first_chunk,
            last_end: self.last_end.unwrap_or(first_chunk),
            sse_to_chunk: self.sse_to_chunk,
        })
    }
}
