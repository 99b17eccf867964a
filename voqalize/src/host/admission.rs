//! [`Admission`]: the calls (or, for a port of [`listen`](super::listen), the connections) one
//! server holds now, against its cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::HostOptions;
/// The calls one server hosts now, against its cap ([`HostBuilder::max_sessions`](crate::host::HostBuilder::max_sessions)): the live
/// state beside the settings. Each way of serving makes one ([`serve`](super::serve),
/// `axum::brain_route`, a relay); a loop of your own over [`accept`](super::accept) makes one
/// with [`Admission::new`] and passes it to every call. Cheap to clone: clones count together.
#[derive(Debug, Clone, Default)]
pub struct Admission(Arc<Places>);

#[derive(Debug, Default)]
struct Places {
    max: Option<usize>,
    live: AtomicUsize,
}

impl Admission {
    /// A count against the cap `options` set (none by default).
    pub fn new(options: &HostOptions) -> Self {
        Admission(Arc::new(Places {
            max: options.max_sessions,
            live: AtomicUsize::new(0),
        }))
    }

    /// A count against a cap of `max` (a port's connections).
    pub(crate) fn with_max(max: usize) -> Self {
        Admission(Arc::new(Places {
            max: Some(max),
            live: AtomicUsize::new(0),
        }))
    }

    /// How many calls are hosted now.
    pub fn open(&self) -> usize {
        self.0.live.load(Ordering::Acquire)
    }

    /// A place for one more call, or `None` at the cap.
    pub(crate) fn admit(&self) -> Option<Admitted> {
        let taken = self.0.live.fetch_add(1, Ordering::AcqRel);
        let admitted = Admitted(self.0.clone());
        match self.0.max {
            Some(max) if taken >= max => None, // dropping `admitted` gives the place back
            _ => Some(admitted),
        }
    }
}

/// A hosted call's place under [`HostBuilder::max_sessions`](crate::host::HostBuilder::max_sessions); freed when dropped.
#[derive(Debug)]
pub(crate) struct Admitted(Arc<Places>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admission_counts_its_clones_together_and_options_share_nothing() {
        let options = HostOptions::builder()
            .allow_unverified()
            .max_sessions(1)
            .build()
            .expect("no key to check");
        let admission = Admission::new(&options);
        let first = admission.clone().admit();
        assert!(first.is_some());
        assert_eq!(admission.open(), 1);
        assert!(admission.admit().is_none(), "at the cap");
        assert_eq!(admission.open(), 1, "a refused call holds no place");
        // Another server made from the same options counts its own calls.
        assert!(Admission::new(&options.clone()).admit().is_some());
        drop(first);
        assert_eq!(admission.open(), 0);
        assert!(admission.admit().is_some());
    }
}
