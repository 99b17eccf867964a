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

use std::fmt;
use std::io::IsTerminal;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written (to standard error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human-readable lines; colours only when standard error is a terminal.
    Human,
    /// One JSON object per line, span fields at the top level.
    Json,
}

/// Why the log set-up failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    /// The level is not an `EnvFilter` directive such as `info` or `voqalize=debug,warn`.
    #[error("invalid log level {level:?}: {source}")]
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
/// # Errors
/// [`LoggingError::Level`] for a directive that does not parse; [`LoggingError::AlreadySet`] when
/// a global subscriber exists already.
pub fn init(level: &str, format: Format) -> Result<(), LoggingError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.trim().is_empty() => EnvFilter::try_new(&env),
        _ => EnvFilter::try_new(level),
    }
    .map_err(|source| LoggingError::Level {
        level: level.to_owned(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        Format::Human => tracing::subscriber::set_global_default(
            builder.with_ansi(std::io::stderr().is_terminal()).finish(),
        ),
        Format::Json => tracing::subscriber::set_global_default(
            builder
                .with_ansi(false)
                .fmt_fields(JsonFields)
                .event_format(FlatJson)
                .finish(),
        ),
    };
    result.map_err(LoggingError::AlreadySet)
}

/// Collects fields into a JSON object.
struct Collect<'m>(&'m mut Map<String, Value>);

impl Visit for Collect<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

/// Span fields stored as a JSON object, so that fields recorded later (`tenant_id` once the token
/// is verified) merge into it.
struct JsonFields;

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut map = Map::new();
        fields.record(&mut Collect(&mut map));
        write!(writer, "{}", Value::Object(map))
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut map = match serde_json::from_str(&current.fields) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        fields.record(&mut Collect(&mut map));
        current.fields = Value::Object(map).to_string();
        Ok(())
    }
}

/// One JSON object per event: time, level, target, the fields of every span it is in (outermost
/// first, so the session's fields are at the top level), then the event's own fields.
struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut time = String::new();
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        line.insert("timestamp".into(), Value::from(time));
        let meta = event.metadata();
        line.insert("level".into(), Value::from(meta.level().as_str()));
        line.insert("target".into(), Value::from(meta.target()));
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<FormattedFields<N>>()
                    && let Ok(Value::Object(map)) = serde_json::from_str(&fields.fields)
                {
                    line.extend(map);
                }
            }
        }
        event.record(&mut Collect(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            crate::recover::lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_carry_the_session_fields_at_the_top_level() {
        let lines = Lines::default();
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .fmt_fields(JsonFields)
            .event_format(FlatJson)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "session",
                service = "brain",
                session_id = "s-1",
                tenant_id = tracing::field::Empty
            );
            span.record("tenant_id", "t-9");
            span.in_scope(|| tracing::info!(hops = 2, "turn: done"));
        });
        let text = String::from_utf8(crate::recover::lock(&lines.0).clone()).unwrap();
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["service"], "brain");
        assert_eq!(line["session_id"], "s-1");
        assert_eq!(line["tenant_id"], "t-9", "fields recorded later merge in");
        assert_eq!(line["message"], "turn: done");
        assert_eq!(line["hops"], 2);
        assert_eq!(line["level"], "INFO");
        assert!(line["timestamp"].as_str().is_some_and(|t| t.contains('T')));
    }
}
