//! One page connection carried to one call: dials the brain as Voqalize would and moves messages
//! both ways through a [`Call`].

use std::sync::Arc;

use axum::extract::ws::{Message as PageMessage, WebSocket};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as BrainMessage;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::Settings;
use super::call::{Call, Out, notice};
use crate::logline::{chain, outside};
use crate::wire;

/// Runs call `n` for one page until either side closes.
pub(super) async fn run(mut page: WebSocket, settings: Arc<Settings>, n: u64) {
    let session_id = format!("console-{n}");
    let config = WebSocketConfig::default()
        .max_message_size(Some(settings.max_brain_message))
        .max_frame_size(Some(settings.max_brain_message));
    let brain = match crate::host::dial::dial(
        &settings.brain_url,
        &session_id,
        settings.token.as_deref(),
        Some(config),
    )
    .await
    {
        Ok(ws) => ws,
        Err(e) => {
            let reason = format!(
                "could not reach the brain at {}: {}",
                settings.brain_url,
                chain(&*e)
            );
            tracing::warn!("console: {}", outside(&reason));
            let _ = send_page(&mut page, &closed(None, &reason)).await;
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
        for frame in out.to_brain.drain(..) {
            let bytes = wire::encode(&frame);
            if let Err(e) = brain_tx.send(BrainMessage::Binary(bytes.into())).await {
                let _ = send_page(
                    &mut page,
                    &closed(None, &format!("sending to the brain failed: {e}")),
                )
                .await;
                return;
            }
        }
        for event in out.to_page.drain(..) {
            if send_page(&mut page, &event).await.is_err() {
                // The page is gone: hang up as Voqalize does when a caller does.
                let _ = brain_tx
                    .send(BrainMessage::Binary(wire::encode(&wire::Frame::End).into()))
                    .await;
                let _ = brain_tx.close().await;
                return;
            }
        }
        if out.done {
            let _ = brain_tx.close().await;
            let _ = page.send(PageMessage::Close(None)).await;
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
            message = brain_rx.next() => match message {
                Some(Ok(BrainMessage::Binary(bytes))) => match wire::decode(&bytes) {
                    Ok(Some(frame)) => call.brain_sent(frame),
                    Ok(None) => notice("the brain sent a frame of a kind wire v3 does not know".into()),
                    Err(e) => notice(format!("the brain sent an unreadable frame: {e}")),
                },
                Some(Ok(BrainMessage::Close(frame))) => {
                    let (code, reason) = frame.map_or((None, String::new()), |f| (Some(u16::from(f.code)), f.reason.to_string()));
                    let _ = send_page(&mut page, &closed(code, &reason)).await;
                    return;
                }
                Some(Ok(_)) => Out::default(),
                Some(Err(e)) => {
                    let _ = send_page(&mut page, &closed(None, &format!("the brain's socket failed: {e}"))).await;
                    return;
                }
                None => {
                    let _ = send_page(&mut page, &closed(None, "the brain's socket ended")).await;
                    return;
                }
            },
        };
    }
}

/// The page's event for a call whose brain socket closed.
fn closed(code: Option<u16>, reason: &str) -> Value {
    json!({"type": "closed", "code": code, "reason": reason})
}

async fn send_page(page: &mut WebSocket, event: &Value) -> Result<(), axum::Error> {
    page.send(PageMessage::Text(event.to_string().into())).await
}
