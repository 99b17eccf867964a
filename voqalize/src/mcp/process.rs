//! A stdio server's process: started with its stdin and stdout piped for MCP and its stderr read
//! into the logs (clipped, summed up) and kept in a short tail that a failed connection quotes;
//! killed with its whole process group.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use super::Shared;
use super::server::Reach;
use crate::logline::outside;
use crate::recover::lock;

/// How many of a server's stderr lines are logged per [`STDERR_WINDOW`]; the rest are counted.
const STDERR_LINES: u32 = 20;
const STDERR_WINDOW: Duration = Duration::from_secs(10);
/// The most bytes of one stderr line read; the rest of it is skipped.
const STDERR_LINE_BYTES: usize = 4096;

/// How many of the last stderr lines a failed connection quotes, and the bytes of each.
const TAIL_LINES: usize = 4;
const TAIL_LINE_BYTES: usize = 200;

/// The last lines a server wrote to stderr (at most [`TAIL_LINES`], each clipped), and whether
/// its stderr has ended.
#[derive(Clone, Default)]
pub(super) struct Tail {
    lines: Arc<Mutex<VecDeque<String>>>,
    ended: Arc<tokio::sync::Notify>,
}

/// A stdio server's process and the process group it leads (its id, kept from the start: once
/// the process has exited and been reaped, tokio no longer gives it, and a grandchild may still
/// hold the pipes).
pub(super) struct Process {
    pub(super) child: tokio::process::Child,
    pub(super) group: Option<u32>,
    /// The last lines of its stderr.
    pub(super) tail: Tail,
}

impl Process {
    /// What a connection that failed early says of its process: its exit status, if it exited
    /// within a moment (`None` if it runs on), and the last lines of its stderr (read to its end,
    /// for a moment at most).
    pub(super) async fn last_words(&mut self) -> (Option<String>, String) {
        let moment = Duration::from_millis(500);
        let ended = self.tail.ended.notified();
        let exited = match tokio::time::timeout(moment, self.child.wait()).await {
            Ok(Ok(status)) => Some(status.to_string()),
            _ => None,
        };
        if exited.is_some() {
            let _ = tokio::time::timeout(moment, ended).await;
        }
        let tail = lock(&self.tail.lines);
        let said = if tail.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            format!("; its stderr ended with: {}", outside(&lines.join(" | ")))
        };
        (exited, said)
    }
}

/// Kills a stdio server's process (and, on Unix, its process group).
pub(super) fn kill(process: &mut Process) {
    #[cfg(unix)]
    if let Some(pid) = process.group.and_then(|id| i32::try_from(id).ok()) {
        // SAFETY: killpg only sends a signal; the group is the one the child leads (a group
        // lives, and keeps its id, while any process of it does).
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
    let _ = process.child.start_kill();
}

/// Starts a stdio server's process: its stdin and stdout piped for MCP, its stderr read into
/// the logs, killed if its handle is dropped.
pub(super) fn spawn(
    shared: &Arc<Shared>,
) -> std::io::Result<(
    Process,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
)> {
    let Reach::Stdio {
        program,
        args,
        env,
        dir,
    } = &shared.server.reach
    else {
        return Err(std::io::Error::other("not a stdio server"));
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn()?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(std::io::Error::other("the process's pipes were not made"));
    };
    let group = child.id();
    let tail = Tail::default();
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(log_stderr(shared.name.clone(), stderr, tail.clone()));
    }
    Ok((Process { child, group, tail }, stdout, stdin))
}

/// Logs a stdio server's stderr at debug level: each line clipped, at most [`STDERR_LINES`]
/// per [`STDERR_WINDOW`], the rest counted in one line.
async fn log_stderr(name: Arc<str>, stderr: tokio::process::ChildStderr, tail: Tail) {
    let mut reader = tokio::io::BufReader::with_capacity(STDERR_LINE_BYTES, stderr);
    let (mut logged, mut skipped, mut since) = (0u32, 0u64, Instant::now());
    let mut line = Vec::new();
    loop {
        line.clear();
        let (done, used) = {
            let Ok(buf) = reader.fill_buf().await else {
                break;
            };
            if buf.is_empty() {
                break;
            }
            match memchr::memchr(b'\n', buf) {
                Some(i) => {
                    line.extend_from_slice(&buf[..i.min(STDERR_LINE_BYTES)]);
                    (true, i + 1)
                }
                None => {
                    let room = STDERR_LINE_BYTES.saturating_sub(line.len());
                    line.extend_from_slice(&buf[..buf.len().min(room)]);
                    (false, buf.len())
                }
            }
        };
        reader.consume(used);
        if !done {
            // The rest of a long line is read on and skipped.
            continue;
        }
        {
            let mut tail = lock(&tail.lines);
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            let text = String::from_utf8_lossy(&line);
            tail.push_back(text[..text.floor_char_boundary(TAIL_LINE_BYTES)].to_owned());
        }
        if since.elapsed() > STDERR_WINDOW {
            if skipped > 0 {
                tracing::debug!("MCP server {name}: {skipped} more stderr lines not logged");
            }
            (logged, skipped, since) = (0, 0, Instant::now());
        }
        if logged < STDERR_LINES {
            logged += 1;
            tracing::debug!(
                "MCP server {name} stderr: {}",
                outside(&String::from_utf8_lossy(&line))
            );
        } else {
            skipped += 1;
        }
    }
    tail.ended.notify_one();
    if skipped > 0 {
        tracing::debug!("MCP server {name}: {skipped} more stderr lines not logged");
    }
}
