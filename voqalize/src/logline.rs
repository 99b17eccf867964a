//! Bounded log output. A peer, the relay, a provider or a model controls what it sends, so it must
//! not control how much the brain logs, nor what a log line looks like:
//!
//! * every string from outside goes into a log line through [`outside`]: at most
//!   [`OUTSIDE_CHARS`] characters, its length in bytes noted when cut, and control characters
//!   escaped, so it can neither flood the log nor forge a line (a newline) nor reach the terminal
//!   (an ESC);
//! * a warning a peer can trigger repeatedly is written once, then summed up at most once per
//!   window ([`Repeated`]: "skipped 51,234 malformed frames in the last 10 s").

use std::fmt;
use std::time::{Duration, Instant};

/// How many characters of a string from outside a log line keeps (200).
pub(crate) const OUTSIDE_CHARS: usize = 200;

/// A string from outside as a log line shows it; see [`outside`]. Formats without allocating.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outside<'a> {
    text: &'a str,
    max: usize,
}

/// `text` (from a peer, the relay, a provider or a model) as it goes into a log line: its first
/// [`OUTSIDE_CHARS`] characters, then `… (N bytes)` when it was longer; every control character
/// (newline, carriage return, ESC, DEL...) written as an escape (`\n`, `\u{1b}`), so one string
/// can never start a new log line or drive the terminal. Formats lazily, as a `Display`.
pub(crate) fn outside(text: &str) -> Outside<'_> {
    outside_n(text, OUTSIDE_CHARS)
}

/// [`outside`] cut at `max` characters (session ids and other short fields keep 64).
pub(crate) fn outside_n(text: &str, max: usize) -> Outside<'_> {
    Outside { text, max }
}

/// `n` and `noun` as a log line counts them: "1 call", "3 calls" (`noun` is singular and takes a
/// plain `s`). Formats without allocating.
pub(crate) fn count(n: usize, noun: &'static str) -> Count {
    Count { n, noun }
}

/// A count of something in a log line; see [`count`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Count {
    n: usize,
    noun: &'static str,
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.n == 1 { "" } else { "s" };
        write!(f, "{} {}{s}", self.n, self.noun)
    }
}

/// An error and every source under it, joined with `: ` ("could not connect to the model API:
/// error sending request: connection refused"). The SDK's error messages never repeat their
/// source (the Rust convention, so a report that walks the chain prints each cause once); a log
/// line that shows an error shows it through this, inside [`outside`], so no cause is lost.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // A wrapper that displays its source (another crate's habit) would repeat it.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// Bidirectional embeddings, overrides and isolates: they reorder what a terminal shows after them.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for Outside<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write as _;
        for (n, c) in self.text.chars().enumerate() {
            if n == self.max {
                return write!(f, "… ({} bytes)", self.text.len());
            }
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                // Bidirectional overrides and isolates reorder what a terminal shows.
                c if c.is_control() || is_bidi_control(c) => {
                    write!(f, "\\u{{{:x}}}", u32::from(c))?;
                }
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// How long a repeated warning stays quiet before it is summed up, unless told otherwise.
const WINDOW: Duration = Duration::from_secs(10);

/// One kind of repeated warning of one session: the first occurrence is logged, later ones are
/// counted and reported in one line per window.
#[derive(Debug)]
pub(crate) struct Repeated {
    what: &'static str,
    window: Duration,
    since: Option<Instant>,
    skipped: u64,
}

impl Repeated {
    /// A limiter for warnings about `what` (plural noun, such as "malformed frames").
    pub(crate) const fn new(what: &'static str) -> Self {
        Self::with_window(what, WINDOW)
    }

    /// A limiter with its own window: one line per `window`, then the count of those skipped.
    pub(crate) const fn with_window(what: &'static str, window: Duration) -> Self {
        Repeated {
            what,
            window,
            since: None,
            skipped: 0,
        }
    }

    /// Whether this occurrence is logged now; when it is not, it is counted. When a window has
    /// passed, the count of the skipped ones is logged first.
    pub(crate) fn allow(&mut self) -> bool {
        let now = Instant::now();
        match self.since {
            Some(since) if now.duration_since(since) < self.window => {
                self.skipped += 1;
                false
            }
            _ => {
                if self.skipped > 0 {
                    tracing::warn!(
                        "skipped {} {} in the last {:?}",
                        self.skipped,
                        self.what,
                        self.window
                    );
                }
                self.since = Some(now);
                self.skipped = 0;
                true
            }
        }
    }
}

impl Drop for Repeated {
    fn drop(&mut self) {
        if self.skipped > 0 {
            tracing::warn!("skipped {} {} before the end", self.skipped, self.what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        /// Our convention: the message does not repeat the source.
        #[error("could not connect to the model API")]
        Connect(#[source] std::io::Error),
        /// Another crate's habit: the message repeats it.
        #[error("wrapped: {0}")]
        Repeats(#[source] std::io::Error),
    }

    #[test]
    fn a_chain_shows_every_cause_once() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            chain(&Outer::Connect(refused())),
            "could not connect to the model API: refused"
        );
        assert_eq!(chain(&Outer::Repeats(refused())), "wrapped: refused");
    }

    #[test]
    fn outside_cuts_on_a_character_boundary_and_says_how_long_the_text_was() {
        assert_eq!(outside_n("short", 10).to_string(), "short");
        assert_eq!(outside_n("ééééé", 2).to_string(), "éé… (10 bytes)");
        let long = "x".repeat(3_000_000);
        let line = outside(&long).to_string();
        assert_eq!(
            line.chars().count(),
            OUTSIDE_CHARS + " (3000000 bytes)".len() + 1
        );
    }

    #[test]
    fn outside_escapes_what_could_forge_a_line_or_reach_the_terminal() {
        let text = "name\n2026-12-01 ERROR forged\r\t\u{1b}[2J\u{7f}\u{202e}end";
        assert_eq!(
            outside(text).to_string(),
            r"name\n2026-12-01 ERROR forged\r\t\u{1b}[2J\u{7f}\u{202e}end"
        );
    }

    #[test]
    fn a_count_is_singular_for_one_only() {
        assert_eq!(count(0, "call").to_string(), "0 calls");
        assert_eq!(count(1, "call").to_string(), "1 call");
        assert_eq!(count(2, "session").to_string(), "2 sessions");
    }

    #[test]
    fn a_repeated_warning_is_allowed_once_per_window() {
        let mut r = Repeated::new("malformed frames");
        assert!(r.allow());
        assert!(!r.allow());
        assert!(!r.allow());
        assert_eq!(r.skipped, 2);
    }
}
