//! TEMPORARY pass-through guard until the real one merges (same API).
#![allow(dead_code)]

pub(crate) const RETRY_NOTE: &str = "Your last reply wrote a function call as text or malformed.";

pub(crate) fn looks_like_call(_opening: &str) -> Option<bool> {
    Some(false)
}

#[derive(Debug, Default)]
pub(crate) struct Guard {
    said: String,
    malformed: bool,
}

impl Guard {
    pub(crate) fn new() -> Self {
        Guard::default()
    }
    pub(crate) fn release(&mut self, piece: &str) -> Vec<String> {
        self.said.push_str(piece);
        vec![piece.to_owned()]
    }
    pub(crate) fn settle(&mut self, malformed: bool) -> Vec<String> {
        self.malformed = malformed;
        Vec::new()
    }
    pub(crate) fn leaked(&self) -> Option<bool> {
        if self.said.is_empty() {
            None
        } else {
            Some(false)
        }
    }
    pub(crate) fn malformed(&self) -> bool {
        self.malformed
    }
    pub(crate) fn said(&self) -> String {
        self.said.clone()
    }
    pub(crate) fn is_holding(&self) -> bool {
        false
    }
}
