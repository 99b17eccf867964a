//! One-call log set-up for a brain process (feature `logging`): human-readable lines on a
//! terminal, or one JSON object per line for a log pipeline, with the session's fields
//! (`service`, `session_id`, `tenant_id`, `agent_id`) at the top level of every line written
//! inside a call. The library never installs a subscriber on its own; call this once in `main`.
//!
//! ```no_run
//! voqalize::logging::init("info", voqalize::logging::Format::Json)?;
//! # Ok::<(), voqalize::logging::LoggingError>(())
//! ```
//!
//! A JSON line looks like
//! `{"timestamp":"2026-12-01T03:30:00.123456Z","level":"INFO","target":"voqalize::voice::turn",
//! "service":"brain","session_id":"3f1c…","tenant_id":"t_1","agent_id":"a_9","message":"turn: …"}`.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::recover::lock;

/// How log lines are written (to standard error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human-readable lines: time, level, the spans with their fields, target, message, fields.
    Human,
    /// One JSON object per line, span fields at the top level.
    Json,
}

/// Why the log set-up failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    /// The level is not an `EnvFilter` directive such as `info` or `voqalize=debug,warn`.
    #[error("invalid log level {level:?}")]
    Level {
        /// What was given.
        level: String,
        /// Why it did not parse.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was installed already (by this function or another crate).
    #[error("a global tracing subscriber is already installed")]
    AlreadySet(#[source] tracing::subscriber::SetGlobalDefaultError),
}

/// Installs the global subscriber: `level` is an `EnvFilter` directive (`info`,
/// `voqalize=debug,warn`...), overridden by `RUST_LOG` when that is set.
///
/// The MCP client underneath (`rmcp`) is silent unless the directive names it (`rmcp=debug`):
/// its lines quote MCP servers' text (their instructions, a message it could not read) unclipped
/// and unescaped, while `voqalize::mcp` logs what a server did, clipped and escaped.
///
/// Span fields are kept by the subscriber itself, in one table, and dropped when the span closes:
/// not in tracing-subscriber's per-span extensions, whose storage outlives the span and, for
/// thousands of calls at once, keeps megabytes after they end (docs/protocol.md §5.3).
///
/// # Errors
/// [`LoggingError::Level`] for a directive that does not parse; [`LoggingError::AlreadySet`] when
/// a global subscriber exists already.
pub fn init(level: &str, format: Format) -> Result<(), LoggingError> {
    let directive = match std::env::var("RUST_LOG") {
        Ok(env) if !env.trim().is_empty() => env,
        _ => level.to_owned(),
    };
    let filter = filter(&directive).map_err(|source| LoggingError::Level {
        level: level.to_owned(),
        source,
    })?;
    let subscriber = tracing_subscriber::registry()
        .with(filter)
        .with(Lines::new(format, std::io::stderr));
    tracing::subscriber::set_global_default(subscriber).map_err(LoggingError::AlreadySet)
}

/// The filter for `directive`: `rmcp=off` added unless it names `rmcp` (see [`init`]).
fn filter(directive: &str) -> Result<EnvFilter, tracing_subscriber::filter::ParseError> {
    let mut filter = EnvFilter::try_new(directive)?;
    if !directive.contains("rmcp")
        && let Ok(off) = "rmcp=off".parse()
    {
        filter = filter.add_directive(off);
    }
    Ok(filter)
}

/// A span's recorded fields, in recording order (a field recorded again replaces its value),
/// kept as they came and formatted only when a line is written inside the span: most spans (a
/// model request's, a turn's) close with no line written, and formatting each field as it is
/// recorded cost more than the rest of their bookkeeping.
#[derive(Debug, Default)]
struct Fields(Vec<(&'static str, Recorded)>);

/// One recorded value.
#[derive(Debug)]
enum Recorded {
    Str(String),
    /// A value recorded with `Debug` or `Display` (`%`), formatted when recorded (it is borrowed).
    Formatted(String),
    I64(i64),
    U64(u64),
    Bool(bool),
    F64(f64),
}

impl Recorded {
    fn json(&self) -> Value {
        match self {
            Recorded::Str(s) | Recorded::Formatted(s) => Value::from(s.as_str()),
            Recorded::I64(n) => Value::from(*n),
            Recorded::U64(n) => Value::from(*n),
            Recorded::Bool(b) => Value::from(*b),
            Recorded::F64(x) => Value::from(*x),
        }
    }
}

impl fmt::Display for Recorded {
    /// As a human line shows it: a string quoted, as `Debug` shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recorded::Str(s) => write!(f, "{s:?}"),
            Recorded::Formatted(s) => f.write_str(s),
            Recorded::I64(n) => write!(f, "{n}"),
            Recorded::U64(n) => write!(f, "{n}"),
            Recorded::Bool(b) => write!(f, "{b}"),
            Recorded::F64(x) => write!(f, "{x}"),
        }
    }
}

impl Fields {
    fn record(&mut self, name: &'static str, value: Recorded) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// `name=value` pairs, a space between.
    fn human(&self, text: &mut String) {
        for (i, (name, value)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let _ = write!(text, "{sep}{name}={value}");
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field.name(), Recorded::Str(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record(field.name(), Recorded::I64(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.record(field.name(), Recorded::U64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.record(field.name(), Recorded::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.record(field.name(), Recorded::F64(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record(field.name(), Recorded::Formatted(format!("{value:?}")));
    }
}

/// An event's fields for a human line: the message as it reads, then the other fields.
#[derive(Default)]
struct MessageFirst {
    message: Option<String>,
    rest: String,
}

impl Visit for MessageFirst {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = Some(format!("{value:?}"));
        } else {
            let sep = if self.rest.is_empty() { "" } else { " " };
            let _ = write!(self.rest, "{sep}{}={value:?}", field.name());
        }
    }
}

/// The layer that writes the lines. It keeps the fields of each open span in its own table,
/// removed when the span closes.
struct Lines<W> {
    format: Format,
    make_writer: W,
    spans: Arc<Mutex<HashMap<Id, Fields>>>,
}

impl<W> Lines<W> {
    fn new(format: Format, make_writer: W) -> Self {
        Lines {
            format,
            make_writer,
            spans: Arc::default(),
        }
    }
}

impl<S, W> Layer<S> for Lines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        lock(&self.spans).insert(id.clone(), fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(fields) = lock(&self.spans).get_mut(id) {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let mut spans = lock(&self.spans);
        spans.remove(&id);
        if spans.is_empty() && spans.capacity() > 64 {
            // Quiet again: give the table's room back.
            *spans = HashMap::new();
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut time = String::with_capacity(TIMESTAMP_BYTES);
        timestamp(std::time::SystemTime::now(), &mut time);
        // The spans the event is in, outermost first.
        let scope: Vec<(&'static str, Id)> = ctx
            .event_scope(event)
            .map(|scope| scope.from_root().map(|s| (s.name(), s.id())).collect())
            .unwrap_or_default();
        let spans = lock(&self.spans);
        let mut line = match self.format {
            Format::Json => {
                let mut line = Map::new();
                line.insert("timestamp".into(), Value::from(time));
                line.insert("level".into(), Value::from(meta.level().as_str()));
                line.insert("target".into(), Value::from(meta.target()));
                for (_, id) in &scope {
                    if let Some(fields) = spans.get(id) {
                        for (name, value) in &fields.0 {
                            line.insert((*name).to_owned(), value.json());
                        }
                    }
                }
                drop(spans);
                let mut own = Fields::default();
                event.record(&mut own);
                for (name, value) in &own.0 {
                    line.insert((*name).to_owned(), value.json());
                }
                Value::Object(line).to_string()
            }
            Format::Human => {
                // Most lines are a timestamp, a level, a span or two and a sentence.
                let mut text = String::with_capacity(256);
                text.push_str(&time);
                text.push(' ');
                text.push_str(padded(*meta.level()));
                text.push(' ');
                for (span, id) in &scope {
                    text.push_str(span);
                    if let Some(fields) = spans.get(id)
                        && !fields.0.is_empty()
                    {
                        text.push('{');
                        fields.human(&mut text);
                        text.push('}');
                    }
                    text.push_str(": ");
                }
                drop(spans);
                text.push_str(meta.target());
                text.push(':');
                let mut message = MessageFirst::default();
                event.record(&mut message);
                if let Some(m) = message.message {
                    let _ = write!(text, " {m}");
                }
                if !message.rest.is_empty() {
                    let _ = write!(text, " {}", message.rest);
                }
                text
            }
        };
        line.push('\n');
        // One write a line, so lines from several threads do not interleave.
        let _ = self
            .make_writer
            .make_writer_for(meta)
            .write_all(line.as_bytes());
    }
}

/// A level as a line shows it, right-aligned in five columns.
fn padded(level: tracing::Level) -> &'static str {
    match level {
        tracing::Level::ERROR => "ERROR",
        tracing::Level::WARN => " WARN",
        tracing::Level::INFO => " INFO",
        tracing::Level::DEBUG => "DEBUG",
        tracing::Level::TRACE => "TRACE",
    }
}

/// The length of a [`timestamp`]: `2026-12-02T05:58:00.360369Z`.
const TIMESTAMP_BYTES: usize = 27;

/// Writes `time` as RFC 3339 in UTC to the microsecond (`2026-12-02T05:58:00.360369Z`), the form
/// tracing-subscriber's `SystemTime` writes, without going through `fmt`: every line has one,
/// and a call writes at least its last. A time before 1970 is written as 1970's start.
fn timestamp(time: std::time::SystemTime, out: &mut String) {
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    digits(out, year, 4);
    out.push('-');
    digits(out, month, 2);
    out.push('-');
    digits(out, day, 2);
    out.push('T');
    digits(out, of_day / 3_600, 2);
    out.push(':');
    digits(out, of_day / 60 % 60, 2);
    out.push(':');
    digits(out, of_day % 60, 2);
    out.push('.');
    digits(out, u64::from(since.subsec_micros()), 6);
    out.push('Z');
}

/// Writes the last `width` decimal digits of `n` (at most 20), zero-padded.
fn digits(out: &mut String, mut n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    for slot in buf[..width.min(20)].iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.extend(buf[..width.min(20)].iter().map(|&b| char::from(b)));
}

/// Held by each unit test that installs a subscriber of its own (`with_default`).
///
/// tracing-core caches each callsite's interest the first time any thread reaches it. While only
/// one dispatcher is registered, that first visit asks the visiting thread's own default: a test
/// on another thread, with none, caches "never", and the DEBUG line the installed subscriber waits
/// for is skipped (CI lost a slow tool call's note this way). A second dispatcher kept for the
/// whole run makes every visit ask all of them, so the answer is "sometimes" and each event is
/// checked against the subscriber of the thread that logs it. The lock keeps the tests that
/// install one from overlapping.
#[cfg(test)]
fn scoped_subscriber() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    static SECOND: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    SECOND.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `f` under a DEBUG subscriber of its own, installed as [`scoped_subscriber`] says; gives
/// what `f` returned and the plain lines it logged.
#[cfg(test)]
pub(crate) fn logged_at_debug<T>(f: impl FnOnce() -> T) -> (T, String) {
    let sink = Sink::default();
    let out = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || out.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let _one_at_a_time = scoped_subscriber();
    let value = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8_lossy(&lock(&sink.0)).into_owned();
    (value, text)
}

/// A shared buffer a test's subscriber writes its lines into.
#[cfg(test)]
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

#[cfg(test)]
impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_rfc_3339_to_the_microsecond() {
        let at = |secs: u64, micros: u64| {
            let mut out = String::new();
            timestamp(
                std::time::UNIX_EPOCH + std::time::Duration::from_micros(secs * 1_000_000 + micros),
                &mut out,
            );
            out
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(at(1_796_190_000, 360_369), "2026-12-02T05:40:00.360369Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999999Z");
        assert_eq!(at(253_402_300_799, 0), "9999-12-31T23:59:59.000000Z");
        assert_eq!(at(0, 0).len(), TIMESTAMP_BYTES);
    }

    /// The MCP SDK's lines quote servers' text unescaped: off unless the directive names it.
    #[test]
    fn the_mcp_sdk_is_silent_unless_the_directive_names_it() {
        let seen = |directive: &str| {
            let sink = Sink::default();
            let out = sink.clone();
            let subscriber = tracing_subscriber::registry()
                .with(filter(directive).expect("a directive"))
                .with(tracing_subscriber::fmt::layer().with_writer(move || out.clone()));
            let _one_at_a_time = scoped_subscriber();
            tracing::subscriber::with_default(subscriber, || {
                tracing::error!(target: "rmcp::transport", "a server's \u{1b}[31m text");
                tracing::warn!(target: "voqalize::mcp", "ours");
            });
            String::from_utf8_lossy(&lock(&sink.0)).into_owned()
        };
        let quiet = seen("info");
        assert!(
            !quiet.contains("a server's") && quiet.contains("ours"),
            "{quiet}"
        );
        assert!(seen("info,rmcp=warn").contains("a server's"));
    }

    /// The race CI hit, made certain: another thread reaches a DEBUG callsite first, while this
    /// test's subscriber is installed; the line still reaches that subscriber.
    #[test]
    fn a_callsite_first_reached_on_another_thread_still_logs_here() {
        fn note() {
            tracing::debug!("noted");
        }
        let other_first = Arc::new(std::sync::Barrier::new(2));
        let other = {
            let other_first = other_first.clone();
            std::thread::spawn(move || {
                other_first.wait();
                note();
                other_first.wait();
            })
        };
        let ((), text) = logged_at_debug(|| {
            other_first.wait();
            other_first.wait();
            note();
        });
        other.join().unwrap();
        assert_eq!(text.matches("noted").count(), 1, "{text}");
    }

    /// Logs one event inside a session span (whose `tenant_id` is recorded later) with `format`;
    /// returns the text written and how many spans the layer still holds.
    fn log_in_a_session(format: Format) -> (String, usize) {
        let sink = Sink::default();
        let out = sink.clone();
        let lines = Lines::new(format, move || out.clone());
        let spans = lines.spans.clone();
        let subscriber = tracing_subscriber::registry().with(lines);
        let _one_at_a_time = scoped_subscriber();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "session",
                service = "brain",
                session_id = %"s-1",
                tenant_id = tracing::field::Empty
            );
            span.record("tenant_id", "t-9");
            span.in_scope(|| tracing::info!(hops = 2, "turn: done"));
        });
        let text = String::from_utf8(lock(&sink.0).clone()).unwrap();
        let held = lock(&spans).len();
        (text, held)
    }

    #[test]
    fn json_lines_carry_the_session_fields_at_the_top_level() {
        let (text, held) = log_in_a_session(Format::Json);
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["service"], "brain");
        assert_eq!(line["session_id"], "s-1");
        assert_eq!(line["tenant_id"], "t-9", "fields recorded later merge in");
        assert_eq!(line["message"], "turn: done");
        assert_eq!(line["hops"], 2);
        assert_eq!(line["level"], "INFO");
        assert!(line["timestamp"].as_str().is_some_and(|t| t.contains('T')));
        assert_eq!(held, 0, "a closed span's fields are dropped");
    }

    #[test]
    fn human_lines_name_the_span_and_its_fields() {
        let (text, held) = log_in_a_session(Format::Human);
        let line = text.trim();
        assert!(
            line.ends_with(
                r#" INFO session{service="brain" session_id=s-1 tenant_id="t-9"}: voqalize::logging::tests: turn: done hops=2"#
            ),
            "{line}"
        );
        assert_eq!(held, 0);
    }
}
