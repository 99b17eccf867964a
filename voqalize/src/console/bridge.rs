//! One page connection carried to one call: dials the brain as Voqalize would and moves messages
//! both ways through a [`Call`].

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message as PageMessage, WebSocket};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as BrainMessage;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::call::{Call, Out, notice};
use super::{Settings, Taps};
use crate::logline::{chain, outside};
use crate::wire;

/// How long the console waits for a brain to answer its upgrade, or to take a frame.
const PATIENCE: Duration = Duration::from_secs(10);

/// Runs call `n` for one page until either side closes.
pub(super) async fn run(mut page: WebSocket, settings: Arc<Settings>, taps: Arc<Taps>, n: u64) {
    let session_id = format!("console-{n}");
    // The tool runs of this call, from a brain in this process (`Console::tool_observer`).
    let (tap, mut tools) = tokio::sync::mpsc::channel(TOOL_EVENTS);
    let _tapped = Tapped::new(&taps, &session_id, tap);
    let brain = match dial(&settings, &session_id).await {
        Ok(ws) => ws,
        Err(reason) => {
            tracing::warn!("console: {}", outside(&reason));
            let _ = send_page(&mut page, &closed(None, &reason), &settings).await;
            return;
        }
    };
    tracing::info!(
        "console: call {session_id} connected to {}",
        outside(&settings.brain_url)
    );
    let (mut brain_tx, mut brain_rx) = brain.split();
    let mut call = Call::new(settings.limits);
    let mut out = call.start(&session_id, settings.init.clone());
    loop {
        if let Err(why) = send_brain(&mut brain_tx, out.to_brain.drain(..)).await {
            let _ = send_page(&mut page, &closed(None, &why), &settings).await;
            return;
        }
        for event in out.to_page.drain(..) {
            if let Err(gone) = send_page(&mut page, &event, &settings).await {
                if let PageGone::Stalled(after) = gone {
                    tracing::info!(
                        "console: call {session_id}: the page took nothing for {after:?}; \
                         the call ends"
                    );
                }
                // The page is gone: hang up as Voqalize does when a caller does.
                let end = BrainMessage::Binary(wire::encode(&wire::Frame::End).into());
                let _ = tokio::time::timeout(PATIENCE, brain_tx.send(end)).await;
                let _ = tokio::time::timeout(PATIENCE, brain_tx.close()).await;
                return;
            }
        }
        if out.done {
            let _ = tokio::time::timeout(PATIENCE, brain_tx.close()).await;
            let _ = tokio::time::timeout(
                settings.page_write_timeout,
                page.send(PageMessage::Close(None)),
            )
            .await;
            return;
        }
        out = tokio::select! {
            message = page.recv() => match message {
                Some(Ok(PageMessage::Text(text))) => call.page_sent(text.as_str()),
                Some(Ok(PageMessage::Close(_))) | None | Some(Err(_)) => {
                    let mut end = Out::default();
                    end.to_brain.push(wire::Frame::End);
                    end.done = true;
                    end
                }
                Some(Ok(_)) => Out::default(),
            },
            Some(event) = tools.recv() => Out {
                to_page: vec![event],
                ..Out::default()
            },
            message = brain_rx.next() => match from_brain(&mut call, message) {
                Ok(out) => out,
                Err(ended) => {
                    let _ = send_page(&mut page, &ended, &settings).await;
                    return;
                }
            },
        };
    }
}

/// Sends `frames` to the brain, each within [`PATIENCE`]; the error is the reason the page is
/// shown.
async fn send_brain(
    brain: &mut (
             impl futures_util::Sink<BrainMessage, Error = tokio_tungstenite::tungstenite::Error> + Unpin
         ),
    frames: impl Iterator<Item = wire::Frame>,
) -> Result<(), String> {
    for frame in frames {
        let message = BrainMessage::Binary(wire::encode(&frame).into());
        match tokio::time::timeout(PATIENCE, brain.send(message)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("sending to the brain failed: {e}")),
            Err(_) => return Err(format!("the brain took nothing for {PATIENCE:?}")),
        }
    }
    Ok(())
}

/// Dials the brain for call `session_id` as Voqalize would, waiting [`PATIENCE`] for its answer;
/// the error is the reason the page is shown.
async fn dial(settings: &Settings, session_id: &str) -> Result<WebSocketStream<TcpStream>, String> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(settings.max_brain_message))
        .max_frame_size(Some(settings.max_brain_message));
    let dialled = tokio::time::timeout(
        PATIENCE,
        crate::host::dial::dial(
            &settings.brain_url,
            session_id,
            settings.token.as_deref(),
            Some(config),
        ),
    )
    .await
    .unwrap_or_else(|_| Err(format!("no answer to the upgrade within {PATIENCE:?}").into()));
    dialled.map_err(|e| {
        format!(
            "could not reach the brain at {}: {}",
            settings.brain_url,
            chain(&*e)
        )
    })
}

/// What the brain's socket gave (`message`), for the call; `Err` with the page's `closed` event
/// when the socket closed, failed or ended.
fn from_brain(
    call: &mut Call,
    message: Option<Result<BrainMessage, tokio_tungstenite::tungstenite::Error>>,
) -> Result<Out, Value> {
    Ok(match message {
        Some(Ok(BrainMessage::Binary(bytes))) => match wire::decode(&bytes) {
            Ok(Some(frame)) => call.brain_sent(frame),
            Ok(None) => notice("the brain sent a frame of a kind wire v3 does not know".into()),
            Err(e) => notice(format!("the brain sent an unreadable frame: {e}")),
        },
        Some(Ok(BrainMessage::Text(_))) => {
            let mut out = Out::default();
            call.once(&mut out, "a text frame (the wire is binary protobuf)");
            out
        }
        Some(Ok(BrainMessage::Close(frame))) => {
            let (code, reason) = frame.map_or((None, String::new()), |f| {
                (Some(u16::from(f.code)), f.reason.to_string())
            });
            return Err(closed(code, &reason));
        }
        Some(Ok(_)) => Out::default(),
        Some(Err(e)) => return Err(closed(None, &format!("the brain's socket failed: {e}"))),
        None => return Err(closed(None, "the brain's socket ended")),
    })
}

/// Tool runs waiting for the page, per call; past it they are not shown.
const TOOL_EVENTS: usize = 64;

/// A call's place among the taps, given back when the call ends.
struct Tapped<'a> {
    taps: &'a Taps,
    session_id: &'a str,
}

impl<'a> Tapped<'a> {
    fn new(taps: &'a Taps, session_id: &'a str, queue: tokio::sync::mpsc::Sender<Value>) -> Self {
        crate::recover::lock(&taps.0).insert(session_id.to_owned(), queue);
        Tapped { taps, session_id }
    }
}

impl Drop for Tapped<'_> {
    fn drop(&mut self) {
        crate::recover::lock(&self.taps.0).remove(self.session_id);
    }
}

/// The page's event for a call whose brain socket closed.
fn closed(code: Option<u16>, reason: &str) -> Value {
    json!({"type": "closed", "code": code, "reason": reason})
}

/// Why an event did not reach the page.
enum PageGone {
    /// Its socket failed or closed.
    Closed,
    /// It took nothing for [`Settings::page_write_timeout`] (the duration).
    Stalled(Duration),
}

/// Sends `event` to the page, waiting at most [`Settings::page_write_timeout`] for it to take it.
async fn send_page(
    page: &mut WebSocket,
    event: &Value,
    settings: &Settings,
) -> Result<(), PageGone> {
    let deadline = settings.page_write_timeout;
    match tokio::time::timeout(
        deadline,
        page.send(PageMessage::Text(event.to_string().into())),
    )
    .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(PageGone::Closed),
        Err(_) => Err(PageGone::Stalled(deadline)),
    }
}
