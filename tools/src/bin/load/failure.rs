//! Why calls fail: kinds and grouped counts.

/// What kind of failure ended a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The TCP connection or the WebSocket handshake failed.
    Connect,
    /// A frame (or the connection) did not come in time, or the run's deadline cut the call.
    Timeout,
    /// The brain closed the connection, ended the call or the socket broke.
    Closed,
    /// The brain sent something this client cannot take (undecodable, a fatal Error, ...).
    Protocol,
}

impl Kind {
    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Connect => "connect",
            Kind::Timeout => "timeout",
            Kind::Closed => "closed",
            Kind::Protocol => "protocol",
        }
    }
}

/// Why a call failed.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Its kind.
    pub kind: Kind,
    /// What happened.
    pub message: String,
}

impl Failure {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

/// Failures grouped by kind: how many, and the first message of each.
#[derive(Default)]
pub struct Failures {
    /// Kind → (count, first message).
    pub by_kind: std::collections::BTreeMap<Kind, (usize, String)>,
}

impl Failures {
    /// Counts one failure.
    pub fn add(&mut self, f: Failure) {
        self.by_kind.entry(f.kind).or_insert((0, f.message)).0 += 1;
    }

    /// How many in all.
    pub fn total(&self) -> usize {
        self.by_kind.values().map(|(n, _)| n).sum()
    }

    /// `{"connect": {"count": n, "first": "..."}, ...}`.
    pub fn json(&self) -> serde_json::Value {
        self.by_kind
            .iter()
            .map(|(k, (n, first))| {
                (
                    k.name().to_owned(),
                    serde_json::json!({ "count": n, "first": first }),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// One human line per kind.
    pub fn print(&self) {
        for (k, (n, first)) in &self.by_kind {
            println!("errors {}: {n} (first: {first})", k.name());
        }
    }
}
