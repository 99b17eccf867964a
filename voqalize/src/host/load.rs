//! Load-based admission: a [`Load`] tells how busy the process is, and above its threshold the
//! direct leg refuses new calls (`503` with `Retry-After`) and readiness turns false, so a load
//! balancer sends them to a process with room.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How busy this process is, as a share (`0.0` idle, `1.0` every CPU it may use busy), and the
/// share above which it takes no new call.
///
/// [`Load::cpu`] (the usual choice) measures this process's CPU time over a sliding window
/// against the CPUs it may use (`std::thread::available_parallelism`, which follows a
/// container's CPU quota and the process's affinity). [`Load::from_fn`] takes a measure of your
/// own: the calls a GPU can still take, a queue's depth, another process's figure.
///
/// Give it to [`HostBuilder::load`](crate::host::HostBuilder::load) to refuse calls above the
/// threshold, and to [`Health::load`](super::Health::load) to report it (readiness turns false
/// above it). Clones share one measure.
///
/// ```
/// use std::time::Duration;
/// use voqalize::host::{HostOptions, Load};
///
/// // Refuse new calls while the process used more than 80 % of its CPUs over the last 5 s.
/// let load = Load::cpu(Duration::from_secs(5)).threshold(0.8);
/// let options = HostOptions::builder().load(&load).build()?;
/// # let _ = options;
/// # Ok::<(), voqalize::host::HostError>(())
/// ```
#[derive(Clone)]
pub struct Load {
    measure: Arc<Measure>,
    threshold: f64,
    /// Set once a measure of one's own panicked (logged once).
    panicked: Arc<std::sync::atomic::AtomicBool>,
}

enum Measure {
    Cpu(Mutex<CpuWindow>),
    Fn(Box<dyn Fn() -> f64 + Send + Sync>),
}

impl std::fmt::Debug for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let measure = match &*self.measure {
            Measure::Cpu(_) => "cpu",
            Measure::Fn(_) => "fn",
        };
        f.debug_struct("Load")
            .field("measure", &measure)
            .field("threshold", &self.threshold)
            .finish()
    }
}

/// The default of [`Load::threshold`]: above 80 % a process still answers its calls' turns
/// promptly, and the balancer has time to send the next call elsewhere.
pub const DEFAULT_THRESHOLD: f64 = 0.8;

impl Load {
    /// This process's CPU time (user and system) over the last `window` (at least 100 ms), as a
    /// share of the CPUs it may use. Measured when read, at most once per eighth of the window
    /// (one `getrusage`), so reading it at every upgrade costs a lock and a clock read. Reads
    /// `0.0` where the platform gives no process CPU time (not Unix).
    pub fn cpu(window: Duration) -> Self {
        let window = window.max(Duration::from_millis(100));
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Load {
            measure: Arc::new(Measure::Cpu(Mutex::new(CpuWindow::new(
                window,
                cpus as f64,
            )))),
            threshold: DEFAULT_THRESHOLD,
            panicked: Arc::default(),
        }
    }

    /// A measure of your own, called at each upgrade and each readiness probe (keep it cheap).
    /// A value that is not a number reads as `0.0`.
    pub fn from_fn(measure: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        Load {
            measure: Arc::new(Measure::Fn(Box::new(measure))),
            threshold: DEFAULT_THRESHOLD,
            panicked: Arc::default(),
        }
    }

    /// For [`Load::cpu`]: the CPUs the share is taken of, instead of those the process may use.
    /// In Kubernetes without a CPU limit the process may use every CPU of the node, so give it
    /// the pod's CPU request (`0.5` for `500m`): the load is then the share of what was asked
    /// for, and a busy pod hands calls to its peers before it slows down. At least 0.01; ignored
    /// for a measure of your own.
    #[must_use]
    pub fn cpus(self, cpus: f64) -> Self {
        if let Measure::Cpu(window) = &*self.measure
            && cpus.is_finite()
        {
            window.lock().unwrap_or_else(PoisonError::into_inner).cpus = cpus.max(0.01);
        }
        self
    }

    /// Above this share no new call is taken (default [`DEFAULT_THRESHOLD`], 0.8). A value that
    /// is not a number is ignored.
    #[must_use]
    pub fn threshold(mut self, threshold: f64) -> Self {
        if !threshold.is_nan() {
            self.threshold = threshold;
        }
        self
    }

    /// The share above which no new call is taken.
    pub fn limit(&self) -> f64 {
        self.threshold
    }

    /// The load now. A measure of your own that panics reads as infinitely busy (no call is
    /// taken, readiness is false: fail closed), logged once.
    pub fn current(&self) -> f64 {
        let value = match &*self.measure {
            Measure::Cpu(window) => window
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .read(Instant::now(), cpu_time()),
            Measure::Fn(measure) => {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(measure)) {
                    Ok(value) => value,
                    Err(panic) => {
                        if !self
                            .panicked
                            .swap(true, std::sync::atomic::Ordering::AcqRel)
                        {
                            tracing::error!(
                                "load: the load measure panicked ({}); calls are refused while it does",
                                crate::recover::panic_text(panic.as_ref())
                            );
                        }
                        f64::INFINITY
                    }
                }
            }
        };
        if value.is_nan() { 0.0 } else { value }
    }

    /// Whether the load is above the threshold now: no new call is taken.
    pub fn is_over(&self) -> bool {
        self.current() > self.threshold
    }
}

/// How many samples the CPU window keeps: one per eighth of the window, and the one at its start.
const SAMPLES: usize = 9;

/// This process's CPU time over a sliding window, from samples taken when it is read.
#[derive(Debug)]
struct CpuWindow {
    window: Duration,
    cpus: f64,
    /// (when, CPU time then), oldest first.
    samples: std::collections::VecDeque<(Instant, Duration)>,
    /// What the last read gave, while no new sample is due.
    last: f64,
}

impl CpuWindow {
    fn new(window: Duration, cpus: f64) -> Self {
        let mut samples = std::collections::VecDeque::with_capacity(SAMPLES + 1);
        samples.push_back((Instant::now(), cpu_time()));
        CpuWindow {
            window,
            cpus: cpus.max(1.0),
            samples,
            last: 0.0,
        }
    }

    /// The load over the window ending `now`, when the process has used `cpu` so far.
    fn read(&mut self, now: Instant, cpu: Duration) -> f64 {
        let due = self
            .samples
            .back()
            .is_none_or(|(at, _)| now.duration_since(*at) >= self.window / 8);
        if !due {
            return self.last;
        }
        self.samples.push_back((now, cpu));
        // Keep one sample at or before the window's start, so the window is whole.
        while self.samples.len() > 2
            && self
                .samples
                .get(1)
                .is_some_and(|(at, _)| now.duration_since(*at) >= self.window)
        {
            self.samples.pop_front();
        }
        while self.samples.len() > SAMPLES {
            self.samples.pop_front();
        }
        let (since, used) = self.base(now);
        let wall = now.duration_since(since).as_secs_f64() * self.cpus;
        if wall > 0.0 {
            self.last = ((cpu.as_secs_f64() - used) / wall).clamp(0.0, 1.0);
        }
        self.last
    }

    /// Where the window starts, and the CPU time (s) used by then: between the last sample at or
    /// before its start and the next one, the CPU time is taken to have grown evenly (after a
    /// long gap between reads the window is the window, not the gap). Before a whole window has
    /// passed, the first sample.
    fn base(&self, now: Instant) -> (Instant, f64) {
        let first = self.samples.front().copied();
        let next = self.samples.get(1).copied();
        match (first, next, now.checked_sub(self.window)) {
            (Some((a, used_a)), Some((b, used_b)), Some(start)) if a < start && start < b => {
                let span = b.duration_since(a).as_secs_f64();
                let into = start.duration_since(a).as_secs_f64();
                let (ua, ub) = (used_a.as_secs_f64(), used_b.as_secs_f64());
                (start, ua + (ub - ua) * into / span)
            }
            (Some((a, used)), _, _) => (a, used.as_secs_f64()),
            (None, _, _) => (now, 0.0),
        }
    }
}

/// The CPU time (user and system) this process has used so far.
#[cfg(unix)]
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a live, aligned, zeroed `rusage` that getrusage fills in; it is read only
    // when the call succeeds.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return Duration::ZERO;
        }
        usage.assume_init()
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(not(unix))]
fn cpu_time() -> Duration {
    Duration::ZERO
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4 s window over two CPUs, its first sample at `start` with no CPU used.
    fn four_seconds_of_two_cpus(start: Instant) -> CpuWindow {
        CpuWindow {
            window: Duration::from_secs(4),
            cpus: 2.0,
            samples: [(start, Duration::ZERO)].into(),
            last: 0.0,
        }
    }

    #[test]
    fn the_window_reads_the_cpu_share_over_its_length() {
        let start = Instant::now();
        let mut w = four_seconds_of_two_cpus(start);
        let s = Duration::from_secs;
        // One CPU of two busy for the first second: half.
        assert_eq!(w.read(start + s(1), s(1)), 0.5);
        // Read again at once: the same, no new sample.
        assert_eq!(w.read(start + s(1), s(9)), 0.5);
        // Idle for the next 7 s: the window (4 s) no longer holds the busy second.
        assert_eq!(w.read(start + s(4), s(1)), 0.125);
        assert_eq!(w.read(start + s(8), s(1)), 0.0);
        // Both CPUs busy for 2 s: a half of the 4 s window.
        assert!((w.read(start + s(10), s(5)) - 0.5).abs() < 1e-9);
        assert!(w.samples.len() <= SAMPLES);
    }

    // Idle for an hour with no read, then every CPU busy: the window is the last 4 s, not the
    // hour, from the first read after the gap on.
    #[test]
    fn a_long_gap_between_reads_does_not_stretch_the_window() {
        let start = Instant::now();
        let mut w = four_seconds_of_two_cpus(start);
        let s = Duration::from_secs;
        let hour = s(3600);
        // The hour was idle: nothing to see yet.
        assert_eq!(w.read(start + hour, Duration::ZERO), 0.0);
        // Busy since: 1 s of two CPUs is a quarter of the window, then all of it.
        assert!((w.read(start + hour + s(1), s(2)) - 0.25).abs() < 1e-9);
        assert!((w.read(start + hour + s(4), s(8)) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_measure_that_panics_fails_closed() {
        let load = Load::from_fn(|| panic!("the GPU probe broke"));
        assert!(load.is_over());
        assert!(load.is_over(), "every time, logged once");
    }

    #[test]
    fn the_cpus_a_share_is_taken_of() {
        // Half a CPU asked for: the share is of that.
        let load = Load::cpu(Duration::from_secs(1)).cpus(0.5);
        let Measure::Cpu(window) = &*load.measure else {
            unreachable!("a CPU measure");
        };
        assert_eq!(
            window.lock().unwrap_or_else(PoisonError::into_inner).cpus,
            0.5
        );
    }

    #[test]
    fn a_measure_of_ones_own_and_its_threshold() {
        let load = Load::from_fn(|| 0.9);
        assert!(load.is_over(), "0.9 is over the default 0.8");
        assert!(!load.clone().threshold(0.95).is_over());
        assert_eq!(Load::from_fn(|| f64::NAN).current(), 0.0);
        assert!(!Load::from_fn(|| f64::NAN).is_over());
        // The process's own CPU: a share, measured now.
        let cpu = Load::cpu(Duration::from_millis(100)).current();
        assert!((0.0..=1.0).contains(&cpu), "{cpu}");
    }
}
