//! Helpers shared by the test modules: a driver with short waits and a log that test brains write to.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

use voqalize::MakeBrain;
use voqalize::host::HostOptions;
use voqalize_testing::Voqalize;

/// A driver dialing the brain over a real WebSocket on 127.0.0.1 (no token checked), with a short
/// quiet window (loopback has little jitter).
pub(crate) async fn driver(factory: impl MakeBrain) -> Voqalize {
    driver_with(factory, HostOptions::allow_unverified()).await
}

/// [`driver`] with host options.
pub(crate) async fn driver_with(factory: impl MakeBrain, options: HostOptions) -> Voqalize {
    let mut v = Voqalize::over_socket(factory, options, None)
        .await
        .expect("a loopback socket");
    v.quiet = Duration::from_millis(60);
    v.linger = Duration::from_millis(300);
    v
}

/// What a test brain records: named events in order, and how often the session ended. Every change
/// wakes [`Log::wait`]ers.
pub(crate) struct Log {
    events: Mutex<Vec<String>>,
    pub session_ends: AtomicUsize,
    end_reasons: Mutex<Vec<voqalize::EndReason>>,
    changed: watch::Sender<usize>,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            events: Mutex::new(Vec::new()),
            session_ends: AtomicUsize::new(0),
            end_reasons: Mutex::new(Vec::new()),
            changed: watch::channel(0).0,
        }
    }
}

impl Log {
    pub(crate) fn push(&self, event: impl Into<String>) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.into());
        self.changed.send_modify(|n| *n += 1);
    }

    /// Waits until `check` holds over this log (5 s at most), without a driver; true if it held.
    pub(crate) async fn until(&self, check: impl Fn(&Log) -> bool) -> bool {
        self.until_within(Duration::from_secs(5), check).await
    }

    /// [`Log::until`] with a bound of its own (for many calls on a loaded machine).
    pub(crate) async fn until_within(&self, bound: Duration, check: impl Fn(&Log) -> bool) -> bool {
        let mut rx = self.changed.subscribe();
        let waited = tokio::time::timeout(bound, async {
            while !check(self) {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        waited.is_ok() && check(self)
    }

    /// Drives `v` until `check` holds over this log (5 s at most); true if it held.
    pub(crate) async fn wait(&self, v: &mut Voqalize, check: impl Fn(&Log) -> bool) -> bool {
        let mut rx = self.changed.subscribe();
        loop {
            if check(self) {
                return true;
            }
            match v.run_until(Duration::from_secs(5), rx.changed()).await {
                Ok(Some(Ok(()))) => continue,
                _ => return check(self),
            }
        }
    }

    pub(crate) fn events(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn ended(&self) -> usize {
        self.session_ends.load(Ordering::SeqCst)
    }

    /// What `on_session_end` was told, each time it ran.
    pub(crate) fn end_reasons(&self) -> Vec<voqalize::EndReason> {
        self.end_reasons
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `on_session_end` ran, told `reason`.
    pub(crate) fn end_because(&self, reason: &voqalize::EndReason) {
        self.end_reasons
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(reason.clone());
        self.end();
    }

    pub(crate) fn end(&self) {
        self.session_ends.fetch_add(1, Ordering::SeqCst);
        self.changed.send_modify(|n| *n += 1);
    }
}

/// The process-wide log capture: every formatted line, in memory.
#[derive(Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl tracing_subscriber::fmt::MakeWriter<'_> for Capture {
    type Writer = Capture;
    fn make_writer(&self) -> Capture {
        self.clone()
    }
}

impl Capture {
    pub(crate) fn lines_with(&self, needle: &str) -> Vec<String> {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

/// Installs the capture as the global subscriber, once per process (tests share the process).
pub(crate) fn logs() -> &'static Capture {
    static LOGS: OnceLock<Capture> = OnceLock::new();
    LOGS.get_or_init(|| {
        let capture = Capture::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(capture.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other test installs a global tracing subscriber");
        capture
    })
}

/// The user says `text` on a model-backed turn that may speak nothing (calls only): waits for the
/// turn's first `model` step, lets the session go quiet, and finalizes every unit of the turn as
/// heard in full. Gives the turn id and what its units said, joined.
///
/// # Errors
/// The driver's error, or no `model` step within 30 s: a bound for a hung turn, not a timing (a
/// long recording replayed in a debug build, beside the rest of the suite on two cores, took
/// more than 5 s).
pub(crate) async fn heard_turn(v: &mut Voqalize, text: &str) -> Result<(u64, String), String> {
    let turn = v.send_user_message(text).await.map_err(|e| e.to_string())?;
    let reported = v
        .wait_for(Duration::from_secs(30), |v| {
            v.turn_steps()
                .iter()
                .any(|s| s.turn_id == turn && s.kind == "model")
        })
        .await
        .map_err(|e| e.to_string())?;
    if !reported {
        return Err(format!("turn {turn} reported no model step"));
    }
    v.quiesce(Duration::from_millis(40), Duration::from_secs(2))
        .await
        .map_err(|e| e.to_string())?;
    let units: Vec<(u64, String)> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| (u.speech_id, u.text()))
        .collect();
    let spoken = units.iter().map(|(_, t)| t.as_str()).collect();
    for (id, heard) in units {
        v.finalize(id, &heard).await.map_err(|e| e.to_string())?;
    }
    Ok((turn, spoken))
}

/// The built-in layer for `provider`, named `model`, against the stand-in at `base_url` with test
/// keys and `timeouts`: what the end-to-end tests run on.
pub(crate) fn layer(
    provider: voqalize_testing::Provider,
    base_url: &str,
    model: &str,
    timeouts: voqalize::model::Timeouts,
) -> voqalize::voice::ModelLayer {
    use voqalize::model::{Anthropic, Chat, Gemini, Interactions, OpenAi};
    use voqalize_testing::Provider;
    match provider {
        Provider::Gemini => Gemini::builder("test-key")
            .model(model)
            .base_url(base_url)
            .timeouts(timeouts)
            .build()
            .expect("a valid layer")
            .into(),
        Provider::OpenAi => OpenAi::builder("test-key", model)
            .base_url(base_url)
            .timeouts(timeouts)
            .build()
            .expect("a valid layer")
            .into(),
        Provider::Chat => Chat::builder(base_url, model)
            .timeouts(timeouts)
            .build()
            .expect("a valid layer")
            .into(),
        Provider::Anthropic => Anthropic::builder("test-key", model)
            .base_url(base_url)
            .timeouts(timeouts)
            .build()
            .expect("a valid layer")
            .into(),
        Provider::Interactions => Interactions::builder("test-key")
            .model(model)
            .base_url(base_url)
            .timeouts(timeouts)
            .build()
            .expect("a valid layer")
            .into(),
        other => panic!("no layer for {other:?}"),
    }
}

/// Every metric recorded under it: counters and gauges by their value, histograms by their
/// samples, each keyed `name{label=value,...}` (labels sorted). A plain `metrics::Recorder`, as
/// any exporter is.
#[derive(Default)]
pub(crate) struct MetricLog(std::sync::Mutex<std::collections::BTreeMap<String, Arc<Series>>>);

#[derive(Default)]
pub(crate) struct Series {
    value: std::sync::Mutex<f64>,
    samples: std::sync::Mutex<Vec<f64>>,
}

impl metrics::CounterFn for Series {
    fn increment(&self, n: u64) {
        *self.value.lock().unwrap() += n as f64;
    }
    fn absolute(&self, n: u64) {
        *self.value.lock().unwrap() = n as f64;
    }
}

impl metrics::GaugeFn for Series {
    fn increment(&self, n: f64) {
        *self.value.lock().unwrap() += n;
    }
    fn decrement(&self, n: f64) {
        *self.value.lock().unwrap() -= n;
    }
    fn set(&self, n: f64) {
        *self.value.lock().unwrap() = n;
    }
}

impl metrics::HistogramFn for Series {
    fn record(&self, sample: f64) {
        self.samples.lock().unwrap().push(sample);
    }
}

impl MetricLog {
    fn series(&self, key: &metrics::Key) -> Arc<Series> {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let name = if labels.is_empty() {
            key.name().to_owned()
        } else {
            format!("{}{{{}}}", key.name(), labels.join(","))
        };
        self.0.lock().unwrap().entry(name).or_default().clone()
    }

    /// A counter's or gauge's value (0 when never recorded).
    pub(crate) fn value(&self, name: &str) -> f64 {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .map_or(0.0, |s| *s.value.lock().unwrap())
    }

    /// A histogram's samples.
    pub(crate) fn samples(&self, name: &str) -> Vec<f64> {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .map(|s| s.samples.lock().unwrap().clone())
            .unwrap_or_default()
    }

    /// Every series recorded.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }
}

impl metrics::Recorder for MetricLog {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.series(key))
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.series(key))
    }
    fn register_histogram(
        &self,
        key: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::from_arc(self.series(key))
    }
}

/// Request `i` the stand-in model server read, in neutral terms, one line per item: `user: ..`,
/// `model: ..`, `call: name`, `result: ..`.
pub(crate) fn said(server: &voqalize_testing::ModelServer, i: usize) -> Vec<String> {
    use voqalize_testing::Said;
    server
        .read_back(i)
        .expect("the request")
        .said
        .into_iter()
        .map(|s| match s {
            Said::User(t) => format!("user: {t}"),
            Said::Model(t) => format!("model: {t}"),
            Said::Call { name, .. } => format!("call: {name}"),
            Said::Result { output, .. } => format!("result: {output}"),
        })
        .collect()
}

/// The caller says `text` on a turn of several model requests that speaks `units` speech units:
/// waits (30 s at most) until they have all ended, then the quiet window, and finalizes each as
/// heard in full. `user_says` alone would end the turn at the first quiet window, which on a
/// loaded machine can fall between two of its requests.
pub(crate) async fn says(
    v: &mut Voqalize,
    text: &str,
    units: usize,
) -> voqalize_testing::TurnRecord {
    let turn = v.send_user_message(text).await.unwrap();
    let ended = v
        .wait_for(Duration::from_secs(30), |v| {
            v.units().filter(|u| u.turn_id == turn && u.ended).count() >= units
        })
        .await
        .unwrap();
    assert!(
        ended,
        "turn {turn} did not speak {units} units: {:#?}",
        v.turn(turn)
    );
    v.quiesce(v.quiet, Duration::from_secs(2)).await.unwrap();
    let spoken: Vec<(u64, String)> = v
        .units()
        .filter(|u| u.turn_id == turn)
        .map(|u| (u.speech_id, u.text()))
        .collect();
    for (id, heard) in spoken {
        v.finalize(id, &heard).await.unwrap();
    }
    v.turn(turn)
}

/// A base URL nothing listens on: connections to it are refused.
pub(crate) async fn refusing() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("its address");
    drop(listener);
    format!("http://{addr}")
}
