//! Allocations a turn of the brain alone: a counting global allocator counts what the brain's
//! runtime thread allocates (its session, its voice core, its HTTP client), not the driver or the
//! stand-in provider, which run on other threads of this process.
//!
//! ```text
//! cargo bench -p voqalize-tools --bench allocs
//! ```
//!
//! A turn's count is the difference between whole calls (connect, `SessionStart`, the turns with
//! their `Finalize`s, `End`, the brain's `on_session_end`) of `N` and `N - 1` turns, the median
//! of `ROUNDS` pairs: for the model-backed brain (Gemini, two tools) the turn at nine turns of
//! history, for the echo brain its tenth turn. `ALLOC_SITES=40` prints the 40 busiest sites of
//! the model-backed turn instead (each the first frame in the SDK and the two above it).
//! `ALLOC_IDLE=200` prints what an idle echo session keeps on the heap instead (200 started
//! sessions held open), by site.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use voqalize::prelude::*;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

/// Counts allocations (and reallocations, by their new size) made on a thread marked counted.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread is the brain's.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

thread_local! {
    /// A backtrace is being taken on this thread (its own allocations are not sites).
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

/// Whether counted allocations keep their backtrace (`ALLOC_SITES`).
static SITES_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The backtraces kept while `SITES_ON`.
static SITES: std::sync::Mutex<Vec<std::backtrace::Backtrace>> = std::sync::Mutex::new(Vec::new());

/// Whether counted allocations are kept by address until freed (`ALLOC_IDLE`).
static CENSUS_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The live blocks kept while `CENSUS_ON`: address, size and backtrace.
static CENSUS: std::sync::Mutex<
    Option<std::collections::HashMap<usize, (usize, std::backtrace::Backtrace)>>,
> = std::sync::Mutex::new(None);

/// Keeps (`Some(size)`) or forgets (`None`) the block at `ptr` while a census runs.
fn census(ptr: *mut u8, size: Option<usize>) {
    if !CENSUS_ON.load(Ordering::Relaxed) || TRACING.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    if size.is_some() && !COUNTED.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    TRACING.set(true);
    let trace = size.map(|size| (size, std::backtrace::Backtrace::force_capture()));
    if let Ok(mut live) = CENSUS.lock() {
        let live = live.get_or_insert_with(Default::default);
        match trace {
            Some(kept) => {
                live.insert(ptr as usize, kept);
            }
            None => {
                live.remove(&(ptr as usize));
            }
        }
    }
    TRACING.set(false);
}

fn count(bytes: usize) {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
        if SITES_ON.load(Ordering::Relaxed) && !TRACING.try_with(Cell::get).unwrap_or(true) {
            TRACING.set(true);
            let trace = std::backtrace::Backtrace::force_capture();
            if let Ok(mut sites) = SITES.lock() {
                sites.push(trace);
            }
            TRACING.set(false);
        }
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; counting allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        census(ptr, Some(layout.size()));
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        census(ptr, Some(layout.size()));
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        census(ptr, None);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        census(ptr, None);
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        census(moved, Some(new_size));
        moved
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Pairs of calls measured for each figure (after as many to warm up).
const ROUNDS: usize = 30;

#[path = "shared/desk.rs"]
mod desk;
use desk::Desk;

/// The echo brain: says the user's words back.
struct Echo {
    ended: mpsc::UnboundedSender<()>,
}

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }

    async fn on_session_end(&self, _: &Session, _: EndReason) {
        let _ = self.ended.send(());
    }
}

/// The brains' addresses (echo, model-backed), served on a thread of their own whose allocations
/// count; each tells `ended` when a call's `on_session_end` ran.
fn brains(model_url: String, ended: mpsc::UnboundedSender<()>) -> (String, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_start(|| COUNTED.set(true))
            .build()
            .expect("a runtime");
        COUNTED.set(true);
        rt.block_on(async move {
            let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await;
            let desk = tokio::net::TcpListener::bind("127.0.0.1:0").await;
            let (echo, desk) = (echo.expect("a port"), desk.expect("a port"));
            let address = |l: &tokio::net::TcpListener| {
                format!("ws://{}", l.local_addr().expect("an address"))
            };
            tx.send((address(&echo), address(&desk)))
                .expect("the bench waits");
            let gemini = Gemini::builder("k")
                .base_url(&model_url)
                .build()
                .expect("a layer");
            let echo_ended = ended.clone();
            let echoes = voqalize::host::serve(
                echo,
                move || Echo {
                    ended: echo_ended.clone(),
                },
                HostOptions::allow_unverified(),
            );
            let desks = voqalize::host::serve(
                desk,
                move || Desk {
                    model: Model::new(gemini.clone()),
                    ended: Some(ended.clone()),
                },
                HostOptions::allow_unverified(),
            );
            let _ = tokio::join!(echoes, desks);
        });
    });
    rx.recv().expect("the brains listen")
}

/// What the brain allocated for one call of `turns` turns: (allocations, bytes).
async fn call(url: &str, turns: usize, ended: &mut mpsc::UnboundedReceiver<()>) -> (u64, u64) {
    let before = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    let mut v = Voqalize::connect(url, "allocs", None)
        .await
        .expect("a call");
    // The whole call is counted, so a frame after the quiet window is counted all the same: a
    // short window only spares the bench waiting 0.25 s a turn (minutes a run).
    v.quiet = std::time::Duration::from_millis(20);
    v.start_silent().await.expect("started");
    for i in 0..turns {
        let turn = v
            .user_says(&format!("I would like to book a table, question {i}."))
            .await
            .expect("a turn");
        assert!(!turn.text().is_empty(), "the brain answered");
    }
    v.end().await.expect("ended");
    ended.recv().await.expect("the brain runs");
    (
        ALLOCATIONS.load(Ordering::Relaxed) - before.0,
        BYTES.load(Ordering::Relaxed) - before.1,
    )
}

/// The median of `values`.
fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

/// A turn's (allocations, bytes) as the median difference between calls of `turns` and
/// `turns - 1` turns; and a call of one turn's.
async fn per_turn(
    url: &str,
    turns: usize,
    ended: &mut mpsc::UnboundedReceiver<()>,
) -> ((u64, u64), (u64, u64)) {
    for _ in 0..ROUNDS {
        call(url, turns, ended).await;
    }
    let (mut allocations, mut bytes, mut one, mut one_bytes) = (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let long = call(url, turns, ended).await;
        let short = call(url, turns - 1, ended).await;
        let single = call(url, 1, ended).await;
        allocations.push(long.0.saturating_sub(short.0));
        bytes.push(long.1.saturating_sub(short.1));
        one.push(single.0);
        one_bytes.push(single.1);
    }
    (
        (median(allocations), median(bytes)),
        (median(one), median(one_bytes)),
    )
}

/// The sites of a model-backed turn's allocations (`ALLOC_SITES=n`: the `n` busiest), as the
/// difference between a call of 10 turns and one of 9: each site is the first frame in the
/// SDK and the two below it.
async fn sites(url: &str, top: usize, ended: &mut mpsc::UnboundedReceiver<()>) {
    let mut counts: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    for (turns, sign) in [(10, 1), (9, -1)] {
        call(url, turns, ended).await;
        SITES_ON.store(true, Ordering::Relaxed);
        call(url, turns, ended).await;
        SITES_ON.store(false, Ordering::Relaxed);
        let traces = std::mem::take(&mut *SITES.lock().expect("the sites"));
        for trace in traces {
            let frames = frames_of(&trace);
            let first = frames
                .iter()
                .position(|f| f.contains("voqalize"))
                .unwrap_or(0);
            let start = first.saturating_sub(2);
            let key = frames[start..(first + 1).min(frames.len())].join("\n    <- ");
            *counts.entry(key).or_default() += sign;
        }
    }
    let mut counts: Vec<(String, i64)> = counts.into_iter().filter(|(_, n)| *n != 0).collect();
    counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (site, n) in counts.into_iter().take(top) {
        println!("{n:5}  {site}");
    }
}

/// A call to `url` as `session`, started and left idle.
async fn started(url: &str, session: &str) -> Voqalize {
    let mut v = Voqalize::connect(url, session, None).await.expect("a call");
    v.start_silent().await.expect("started");
    v
}

/// The function names of `trace`'s frames, without the backtrace's and this bench's own.
fn frames_of(trace: &std::backtrace::Backtrace) -> Vec<String> {
    trace
        .to_string()
        .lines()
        .filter_map(|l| l.trim_start().split_once(": ").map(|(_, f)| f.to_owned()))
        .filter(|f| !f.starts_with("std::backtrace") && !f.contains("allocs::"))
        .collect()
}

/// What an idle session keeps on the heap (`ALLOC_IDLE=n`: `n` started, idle echo sessions), by
/// site: the bytes asked for and the blocks glibc hands out for them (16-byte steps, 32 at least,
/// 8 of them its header), each a session's share.
async fn idle(url: &str, n: usize) {
    let mut calls = Vec::with_capacity(n);
    // Warm up: the process's once-only allocations are not a session's.
    for i in 0..8 {
        calls.push(started(url, &format!("warm-{i}")).await);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    *CENSUS.lock().expect("the census") = Some(Default::default());
    CENSUS_ON.store(true, Ordering::Relaxed);
    for i in 0..n {
        calls.push(started(url, &format!("idle-{i}")).await);
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    CENSUS_ON.store(false, Ordering::Relaxed);
    let live = CENSUS
        .lock()
        .expect("the census")
        .take()
        .unwrap_or_default();
    let mut sites: std::collections::HashMap<String, (usize, usize, usize)> = Default::default();
    for (size, trace) in live.into_values() {
        let frames: Vec<String> = frames_of(&trace)
            .into_iter()
            .filter(|f| {
                !f.starts_with("__rustc")
                    && !f.starts_with("alloc::")
                    && !f.starts_with("core::")
                    && !f.starts_with("std::")
            })
            .collect();
        let key = frames[..frames.len().min(4)].join("\n    <- ");
        let block = (size + 8).div_ceil(16).max(2) * 16;
        let entry = sites.entry(key).or_default();
        entry.0 += 1;
        entry.1 += size;
        entry.2 += block;
    }
    let mut sites: Vec<_> = sites.into_iter().collect();
    sites.sort_by_key(|(_, (_, _, block))| std::cmp::Reverse(*block));
    let (blocks, asked, held) = sites
        .iter()
        .fold((0, 0, 0), |t, (_, s)| (t.0 + s.0, t.1 + s.1, t.2 + s.2));
    println!(
        "an idle session: {:.1} blocks, {} bytes asked, {} bytes held",
        blocks as f64 / n as f64,
        asked / n,
        held / n
    );
    for (site, (count, asked, held)) in sites {
        if held / n >= 8 {
            println!(
                "{:6} held {:6} asked {:5.1} blocks  {site}",
                held / n,
                asked / n,
                count as f64 / n as f64
            );
        }
    }
    drop(calls);
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: a build check, not a measurement.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let server = ModelServer::start(Provider::Gemini).await.expect("a port");
        let mut words = Reply::new();
        for i in 0..8 {
            words = words.text(&format!("word{i} "));
        }
        let answer = words.finish().usage(100, 10);
        server.answer_with(move |_| answer.clone());
        let (ended_tx, mut ended) = mpsc::unbounded_channel();
        let (echo, desk) = brains(server.base_url(), ended_tx);
        if let Some(n) = std::env::var("ALLOC_IDLE")
            .ok()
            .and_then(|n| n.parse().ok())
        {
            idle(&echo, n).await;
            return;
        }
        if let Some(top) = std::env::var("ALLOC_SITES")
            .ok()
            .and_then(|n| n.parse().ok())
        {
            sites(&desk, top, &mut ended).await;
            return;
        }
        println!("| path | allocations a turn | bytes a turn | a call of one turn |");
        println!("|---|---|---|---|");
        for (name, url, turns) in [
            ("echo (its 10th turn)", &echo, 10),
            (
                "model-backed, Gemini, two tools (a turn at 9 turns of history)",
                &desk,
                10,
            ),
        ] {
            let ((allocations, bytes), (one, one_bytes)) = per_turn(url, turns, &mut ended).await;
            println!("| {name} | {allocations} | {bytes} | {one} allocations, {one_bytes} bytes |");
        }
    });
}
