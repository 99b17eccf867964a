//! Answering calls exactly once, in order (docs/protocol.md §6.5, §6.8): every call a model turn
//! made gets one result, filed right after that turn in call order, whoever answers it (its tool
//! run when it ends, a barge-in that cancels it, its timeout) and whenever (a run that finishes
//! after its turn was barged in on answers into the history the next request is built from).
//!
//! The state lives in the [`Conversation`](super::conversation::Conversation), under its lock,
//! so a result and the entries it lands among change together.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::model::history::{EntryId, ToolResult};

/// How many model turns may have calls waiting for their answers at once: a turn's calls are
/// bounded by `max_calls_per_response`, and the turns by the history; this only bounds memory
/// against a history that lost the turns (a turn whose model turn is gone is forgotten first).
const MAX_OPEN: usize = 64;

/// The calls of one model turn and their answers.
#[derive(Debug)]
struct Filing {
    model: EntryId,
    /// The results turn right after the model turn, once a result was filed.
    results: Option<EntryId>,
    /// Calls filed in the model turn.
    calls: usize,
    /// The first `answered` calls have their result filed.
    answered: usize,
    /// Results of later calls, waiting for an earlier call's.
    ready: BTreeMap<usize, ToolResult>,
    /// When each unanswered call's run must have answered it (its timeout, and a margin).
    due: BTreeMap<usize, Instant>,
    /// Its response ended: no call joins it any more.
    closed: bool,
}

impl Filing {
    fn complete(&self) -> bool {
        self.answered == self.calls
    }
}

/// The model turns whose calls are not all answered yet.
#[derive(Debug, Default)]
pub(super) struct Filings {
    open: Vec<Filing>,
}

impl Filings {
    /// A call was filed in model turn `model`, to be answered by `due`: its ordinal among the
    /// turn's calls.
    pub(super) fn call(&mut self, model: EntryId, due: Instant) -> usize {
        let at = match self.open.iter().position(|f| f.model == model) {
            Some(at) => at,
            None => {
                if self.open.len() >= MAX_OPEN {
                    self.open.remove(0);
                }
                self.open.push(Filing {
                    model,
                    results: None,
                    calls: 0,
                    answered: 0,
                    ready: BTreeMap::new(),
                    due: BTreeMap::new(),
                    closed: false,
                });
                self.open.len() - 1
            }
        };
        let filing = &mut self.open[at];
        let ordinal = filing.calls;
        filing.calls += 1;
        filing.due.insert(ordinal, due);
        ordinal
    }

    /// Takes `result` as the answer to call `ordinal` of `model`, unless that call was answered
    /// already: then `false`, and nothing changes. `file` files each result whose turn has come,
    /// in call order, into the results turn it is given (created by `file` when `None`).
    pub(super) fn answer(
        &mut self,
        model: EntryId,
        ordinal: usize,
        result: ToolResult,
        mut file: impl FnMut(&mut Option<EntryId>, ToolResult),
    ) -> bool {
        let Some(at) = self.open.iter().position(|f| f.model == model) else {
            return false;
        };
        let filing = &mut self.open[at];
        if ordinal < filing.answered
            || ordinal >= filing.calls
            || filing.ready.contains_key(&ordinal)
        {
            return false;
        }
        filing.due.remove(&ordinal);
        filing.ready.insert(ordinal, result);
        while let Some(result) = filing.ready.remove(&filing.answered) {
            file(&mut filing.results, result);
            filing.answered += 1;
        }
        true
    }

    /// Whether any call waits for its answer.
    pub(super) fn waiting(&self) -> bool {
        self.open.iter().any(|f| !f.complete())
    }

    /// When the last call waiting for its answer is due, if any waits.
    pub(super) fn last_due(&self) -> Option<Instant> {
        self.open.iter().flat_map(|f| f.due.values()).max().copied()
    }

    /// The calls still waiting whose answer was due by `now`: `(model, ordinal)`.
    pub(super) fn overdue(&self, now: Instant) -> Vec<(EntryId, usize)> {
        self.open
            .iter()
            .flat_map(|f| {
                f.due
                    .iter()
                    .filter(move |(_, due)| **due <= now)
                    .map(move |(ordinal, _)| (f.model, *ordinal))
            })
            .collect()
    }

    /// The response of model turn `model` ended: it takes no more calls.
    pub(super) fn close(&mut self, model: EntryId) {
        if let Some(f) = self.open.iter_mut().find(|f| f.model == model) {
            f.closed = true;
        }
    }

    /// Forgets the model turns whose response ended with every call answered, and those
    /// `present` says left the history.
    pub(super) fn forget_settled(&mut self, present: impl Fn(EntryId) -> bool) {
        self.open
            .retain(|f| !(f.closed && f.complete()) && present(f.model));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(n: usize) -> ToolResult {
        ToolResult {
            call_id: Some(format!("call_{n}")),
            name: format!("t{n}"),
            response: json!({"result": n}),
        }
    }

    #[test]
    fn results_file_in_call_order_and_each_call_once() {
        let mut f = Filings::default();
        let due = Instant::now();
        assert_eq!((f.call(7, due), f.call(7, due), f.call(7, due)), (0, 1, 2));
        let filed = std::cell::RefCell::new(Vec::new());
        let mut file = |r: &mut Option<EntryId>, t: ToolResult| {
            *r = Some(99);
            filed.borrow_mut().push(t.name);
        };
        assert!(f.answer(7, 2, result(2), &mut file));
        assert!(f.answer(7, 1, result(1), &mut file));
        assert!(
            !f.answer(7, 1, result(1), &mut file),
            "a second answer is refused"
        );
        assert!(f.waiting());
        assert_eq!(f.overdue(due), [(7, 0)]);
        assert!(f.answer(7, 0, result(0), &mut file));
        assert!(!f.answer(7, 0, result(0), &mut file));
        assert!(!f.answer(7, 3, result(3), &mut file), "no such call");
        assert!(!f.answer(8, 0, result(0), &mut file), "no such turn");
        assert_eq!(*filed.borrow(), ["t0", "t1", "t2"]);
        assert!(!f.waiting());
        assert_eq!(f.last_due(), None);
        f.forget_settled(|_| true);
        assert_eq!(
            f.open.len(),
            1,
            "its response is still open: a call may join it"
        );
        assert_eq!(f.call(7, due), 3);
        assert!(f.answer(7, 3, result(3), &mut file));
        f.close(7);
        f.forget_settled(|_| true);
        assert!(f.open.is_empty());
    }
}
