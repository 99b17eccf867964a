//! The relay leg's message limits (docs/protocol.md §2.2, "Limits after the demux"): a message over
//! a call's `max_message_bytes` ends that call only, up to the relay socket's own bound (8 MiB + 16
//! bytes at the defaults); only a message over that bound loses the connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use voqalize::prelude::*;
use voqalize::relay::Relay;
use voqalize::session::{BoundExceeded, TransportLoss};
use voqalize::wire::Frame;

use crate::relay::{echo, says, serve, stand_in, start};
use crate::support::Log;

/// The relay socket's bound at the defaults: a call's 1 MiB, the 16-byte prefix, and the 7 MiB of
/// `RelayBuilder::frame_headroom`.
const SOCKET_BOUND: usize = 8 * 1024 * 1024 + 16;

/// A binary message of `bytes` bytes in all, prefix included, for `prefix`.
fn message_of(prefix: [u8; 16], bytes: usize) -> Message {
    let mut message = vec![0u8; bytes];
    message[..16].copy_from_slice(&prefix);
    Message::Binary(message.into())
}

// Messages over a call's 1 MiB, up to the socket's bound: 2,097,180 bytes (over what the socket
// took before, 2 MiB + 16) and exactly the bound for two running calls, the bound for a prefix with
// no call. Each running call ends alone, told the bound it passed, with its End to the relay; the
// unknown prefix's message is skipped; the bystander goes on, on the same connection.
#[tokio::test]
async fn a_message_over_a_calls_limit_ends_that_call_only_up_to_the_sockets_bound() {
    let (a, b, c, d) = ([0xa; 16], [0xb; 16], [0xc; 16], [0xd; 16]);
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(a, &start("gets-2-mib")).await;
    link.send(d, &start("gets-the-bound")).await;
    link.send(b, &start("bystander")).await;
    link.send(b, &says(2, "before")).await;
    assert_eq!(link.spoken().await, (b, "before".to_owned()));
    link.send_raw(message_of(a, 2_097_180)).await;
    link.send_raw(message_of(c, SOCKET_BOUND)).await;
    link.send_raw(message_of(d, SOCKET_BOUND)).await;
    let mut ended = Vec::new();
    while ended.len() < 2 {
        if let (prefix, Frame::End) = link.recv().await {
            assert!(
                prefix == a || prefix == d,
                "only those calls end: {prefix:?}"
            );
            ended.push(prefix);
        }
    }
    assert!(log.until(|l| l.ended() == 2).await);
    assert_eq!(
        log.end_reasons(),
        vec![EndReason::BoundExceeded(BoundExceeded::InboundMessage); 2]
    );
    link.send(b, &says(3, "after")).await;
    assert_eq!(link.spoken().await, (b, "after".to_owned()));
    assert_eq!(
        relay.attempts.load(Ordering::SeqCst),
        1,
        "the connection stayed"
    );
}

// One byte over the socket's bound, even for a prefix with no call: the WebSocket cannot be read
// past it, so the connection is lost, every call on it ends (told the relay was lost), and the
// relay is redialled.
#[tokio::test]
async fn a_message_over_the_sockets_bound_loses_the_connection_and_its_calls() {
    let (a, b) = ([0xa; 16], [0xb; 16]);
    let mut relay = stand_in().await;
    let (log, release) = (Arc::new(Log::default()), Arc::new(Notify::new()));
    let agent = Relay::builder(relay.url(), "v9")
        .api_key("k")
        .reconnect_backoff(Duration::from_millis(1), Duration::from_millis(4))
        .build()
        .unwrap();
    let (_stop, _task) = serve(agent, echo(&log, &release));
    let mut link = relay.agent().await;
    link.send(a, &start("first")).await;
    link.send(b, &start("second")).await;
    link.send(b, &says(2, "up")).await;
    assert_eq!(link.spoken().await, (b, "up".to_owned()));
    // The agent refuses it from its header and drops the connection while it is being written.
    link.send_lossy(message_of([0xc; 16], SOCKET_BOUND + 1))
        .await;
    let mut again = relay.agent().await;
    assert!(log.until(|l| l.ended() == 2).await);
    assert_eq!(
        log.end_reasons(),
        vec![EndReason::TransportLost(TransportLoss::RelayLost); 2]
    );
    assert_eq!(relay.attempts.load(Ordering::SeqCst), 2, "redialled");
    again.send(a, &start("after")).await;
    again.send(a, &says(2, "back")).await;
    assert_eq!(again.spoken().await, (a, "back".to_owned()));
}
