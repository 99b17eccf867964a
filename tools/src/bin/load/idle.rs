//! Idle sessions: the brain's memory and open files per started, idle session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use voqalize::wire::Frame;
use voqalize_testing::TokenSigner;

use crate::Args;
use crate::client::{Ws, dial, send_bounded, session_start};
use crate::failure::{Failure, Failures};
use crate::probe::{
    open_files, raise_open_file_limit, rss_kb, settled_files, settled_rss, steady_rss,
};

/// Holds `n` idle sessions open and reports the brain's RSS and open files before, with them,
/// and after.
pub async fn idle(
    args: &Args,
    n: usize,
    signer: Option<TokenSigner>,
) -> Result<(), Box<dyn std::error::Error>> {
    raise_open_file_limit();
    let pid = args.brain_pid.ok_or("--idle needs --brain-pid")?;
    let url = Arc::new(args.url.clone().ok_or("--idle needs --url")?);
    let (rss_before, files_before) = (rss_kb(pid)?, open_files(pid)?);
    let (close_tx, close_rx) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let opened = open_sessions(url, Arc::new(signer), n, args.timeout()).await;
    let open_s = started.elapsed().as_secs_f64();
    let mut failures = Failures::default();
    let mut holders = tokio::task::JoinSet::new();
    for ws in opened {
        match ws {
            Err(f) => failures.add(f),
            Ok(ws) => {
                holders.spawn(hold(ws, close_rx.clone()));
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
    let files_after = settled_files(pid, files_before, Duration::from_secs(10)).await?;
    let rss_after = settled_rss(pid, rss_before, Duration::from_secs(15)).await?;
    let report = IdleReport {
        n,
        held,
        dropped_early,
        open_s,
        rss: [rss_before, rss_with, rss_after],
        files: [files_before, files_with, files_after],
    };
    report.print(args.json, &failures);
    if failures.total() == 0 {
        Ok(())
    } else {
        Err(format!("{} sessions failed to open", failures.total()).into())
    }
}

/// Connects `n` sessions, 200 at a time, each sent its SessionStart.
async fn open_sessions(
    url: Arc<String>,
    signer: Arc<Option<TokenSigner>>,
    n: usize,
    timeout: Duration,
) -> Vec<Result<Ws, Failure>> {
    futures_util::stream::iter(0..n)
        .map(|id| {
            let (url, signer) = (url.clone(), signer.clone());
            async move {
                let session_id = format!("idle-{id}");
                let token = signer.as_ref().as_ref().map(|s| s.mint(&session_id));
                let mut ws = dial(&url, &session_id, token.as_deref(), timeout).await?;
                let start = voqalize::wire::encode(&session_start(session_id));
                send_bounded(&mut ws, Message::Binary(start.into())).await?;
                Ok::<Ws, Failure>(ws)
            }
        })
        .buffer_unordered(200)
        .collect::<Vec<_>>()
        .await
}

/// Holds an open session: reads (answering the brain's pings) until `close` changes, then ends
/// the call (bounded by 2 s). False if the brain closed it first.
async fn hold(mut ws: Ws, mut close: tokio::sync::watch::Receiver<bool>) -> bool {
    loop {
        tokio::select! {
            _ = close.changed() => break,
            m = ws.next() => match m {
                Some(Ok(_)) => continue,
                _ => return false,
            },
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let end = voqalize::wire::encode(&Frame::End);
        let _ = ws.send(Message::Binary(end.into())).await;
        let _ = ws.close(None).await;
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
    true
}

/// The idle run's numbers.
struct IdleReport {
    /// Sessions asked for.
    n: usize,
    /// Sessions held open.
    held: usize,
    /// Sessions the brain closed before the end.
    dropped_early: usize,
    /// Seconds to open them.
    open_s: f64,
    /// The brain's RSS in kB: before, with the sessions, after.
    rss: [u64; 3],
    /// The brain's open files: before, with the sessions, after.
    files: [usize; 3],
}

impl IdleReport {
    fn print(&self, json: bool, failures: &Failures) {
        let IdleReport {
            n,
            held,
            dropped_early,
            open_s,
            rss: [rss_before, rss_with, rss_after],
            files: [files_before, files_with, files_after],
        } = *self;
        let per_session = rss_with.saturating_sub(rss_before) as f64 / held.max(1) as f64;
        if json {
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
    }
}
