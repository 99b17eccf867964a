//! The brain's process: RSS, CPU time and open files from /proc, its `--stats-file`, and an
//! RSS peak sampler.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// The resident set size of process `pid`, in kB (`VmRSS` of /proc/PID/status).
pub fn rss_kb(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
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
pub fn cpu_ms(pid: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let (user, system) = cpu_split_ms(pid)?;
    Ok(user + system)
}

/// The CPU time process `pid` has used in user space and in the kernel, in ms (utime and stime
/// of /proc/PID/stat; 100 ticks a second).
pub fn cpu_split_ms(pid: &str) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after its closing parenthesis.
    let rest = stat.rsplit_once(')').ok_or("no command name")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let user: u64 = fields.get(11).ok_or("no utime")?.parse()?;
    let system: u64 = fields.get(12).ok_or("no stime")?.parse()?;
    Ok((user * 10, system * 10))
}

/// The CPU time process `pid`'s threads have run, in ns: the sum of the first field of each
/// `/proc/PID/task/TID/schedstat` (the scheduler's own clock, not 10 ms ticks). A thread that
/// exits takes its time with it; a brain's runtime threads live as long as it does.
pub fn cpu_ns(pid: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended since the listing has no file any more: its time is gone anyway.
        let Ok(stat) = std::fs::read_to_string(path) else {
            continue;
        };
        let ns: u64 = stat
            .split_whitespace()
            .next()
            .ok_or("empty schedstat")?
            .parse()?;
        total += ns;
    }
    Ok(total)
}

/// The number of open file descriptors of process `pid`.
pub fn open_files(pid: u32) -> Result<usize, Box<dyn std::error::Error>> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// Reads the open files of `pid` every 200 ms until they are back to `baseline` or `cap` passed
/// (sockets of cut calls close a little after the calls); gives the last reading.
pub async fn settled_files(
    pid: u32,
    baseline: usize,
    cap: Duration,
) -> Result<usize, Box<dyn std::error::Error>> {
    let until = Instant::now() + cap;
    let mut now = open_files(pid)?;
    while now > baseline && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        now = open_files(pid)?;
    }
    Ok(now)
}

/// Samples the RSS of `pid` every 500 ms until it stops falling: back within 2% of `baseline`,
/// or no new low for 11 s (longer than the examples' 10 s `malloc_trim` period), or `cap` passed.
/// Gives the last reading.
pub async fn settled_rss(
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
pub async fn steady_rss(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
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
pub fn raise_open_file_limit() {
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
pub struct BrainStats {
    /// Live tokio tasks in the brain (its stats writer included).
    pub alive_tasks: u64,
    /// Sessions whose start the brain handled.
    pub sessions_started: u64,
    /// Sessions whose end the brain handled.
    pub sessions_ended: u64,
}

impl BrainStats {
    /// Reads the brain's stats file.
    pub fn read(path: &std::path::Path) -> Result<Self, Box<dyn std::error::Error>> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let age = std::fs::metadata(path)?
            .modified()?
            .elapsed()
            .unwrap_or_default();
        if age > std::time::Duration::from_secs(3) {
            return Err(format!(
                "{}: last written {age:?} ago (is the brain running with --stats-file?)",
                path.display()
            )
            .into());
        }
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

/// Samples the RSS of `pid` every 100 ms and keeps the peak, until dropped.
pub struct PeakSampler {
    /// The peak so far, in kB.
    pub peak: Arc<std::sync::atomic::AtomicU64>,
    /// The sampling task.
    pub task: tokio::task::JoinHandle<()>,
}

impl PeakSampler {
    /// Starts sampling.
    pub fn start(pid: u32, first: u64) -> Self {
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
    pub fn stop(self) -> u64 {
        self.task.abort();
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}
