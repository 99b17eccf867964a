//! Bounded log output. A peer controls what it sends, so it must not control how much the brain
//! logs: strings from the wire are cut to a length, and a warning a peer can trigger per frame is
//! written once, then summed up at most once per window ("skipped 51,234 malformed frames in the
//! last 10 s").

use std::borrow::Cow;
use std::time::{Duration, Instant};

/// At most `max` characters of a peer-controlled string, with the full length in bytes when cut.
pub(crate) fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((at, _)) => Cow::Owned(format!("{}… ({} bytes)", &text[..at], text.len())),
        None => Cow::Borrowed(text),
    }
}

/// How long a repeated warning stays quiet before it is summed up.
const WINDOW: Duration = Duration::from_secs(10);

/// One kind of repeated warning of one session: the first occurrence is logged, later ones are
/// counted and reported in one line per window.
#[derive(Debug)]
pub(crate) struct Repeated {
    what: &'static str,
    since: Option<Instant>,
    skipped: u64,
}

impl Repeated {
    /// A limiter for warnings about `what` (plural noun, such as "malformed frames").
    pub(crate) const fn new(what: &'static str) -> Self {
        Repeated {
            what,
            since: None,
            skipped: 0,
        }
    }

    /// Whether this occurrence is logged now; when it is not, it is counted. When a window has
    /// passed, the count of the skipped ones is logged first.
    pub(crate) fn allow(&mut self) -> bool {
        let now = Instant::now();
        match self.since {
            Some(since) if now.duration_since(since) < WINDOW => {
                self.skipped += 1;
                false
            }
            _ => {
                if self.skipped > 0 {
                    tracing::warn!(
                        "session: skipped {} {} in the last {:?}",
                        self.skipped,
                        self.what,
                        WINDOW
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
            tracing::warn!(
                "session: skipped {} {} before the end",
                self.skipped,
                self.what
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_on_a_character_boundary_and_says_how_long_the_text_was() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("ééééé", 2), "éé… (10 bytes)");
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
