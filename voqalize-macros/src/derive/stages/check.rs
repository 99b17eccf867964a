//! The stages as a graph: every `to(..)` names another stage, every stage has a way out (a
//! `to(..)`, or `end`) and not both, and every stage can be reached from the first, where a call
//! starts.

use std::collections::VecDeque;

use super::{Named, StagesEnum};
use crate::ctxt::Ctxt;

/// Checks the stages; returns each stage's `to(..)` as places among the stages, without the
/// entries that are errors (a name that is no stage, the stage itself).
pub(super) fn check(ctxt: &Ctxt, stages: &StagesEnum<'_>) -> Vec<Vec<usize>> {
    let names: Vec<&str> = stages.stages.iter().map(|s| s.name.as_str()).collect();
    let mut resolved = Vec::with_capacity(names.len());
    // The edges the reachability check follows: the resolved ones, and for a name that is no
    // stage the stage it is nearest to (the fix its error suggests), so one typo is one error.
    let mut edges = Vec::with_capacity(names.len());
    // A name that is no stage and near none, or a stage whose `#[stage]` did not read: the graph
    // the user means is unknown, and the reachability check would guess.
    let mut unknown_edge = stages.stages.iter().any(|s| s.garbled);
    for (i, stage) in stages.stages.iter().enumerate() {
        let mut to = Vec::new();
        let mut leads = Vec::new();
        for target in &stage.to {
            match names.iter().position(|n| *n == target.text) {
                Some(j) if j == i => ctxt.syn_error(syn::Error::new(
                    target.span,
                    format!(
                        "stage `{0}` names itself in `to(..)`: the call is already in `{0}`, and \
                         `to(..)` names the stages it may move on to; remove `{0}` here",
                        stage.name
                    ),
                )),
                Some(j) => {
                    to.push(j);
                    leads.push(j);
                }
                None => match not_a_stage(ctxt, stages, &names, target) {
                    Some(j) => leads.push(j),
                    None => unknown_edge = true,
                },
            }
        }
        match (stage.end, stage.to.is_empty()) {
            (None, true) if !stage.garbled => ctxt.error_spanned_by(
                stage.variant,
                format!(
                    "stage `{}` has no way out: add `to(NextStage)` to hand the call on, or \
                     `end` if the call may end here",
                    stage.name
                ),
            ),
            (Some(end), false) => ctxt.syn_error(syn::Error::new(
                end,
                format!(
                    "stage `{}` is `end` and has `to(..)`: a stage is `end` or has `to(..)`, \
                     not both (`end` is a stage with no way out)",
                    stage.name
                ),
            )),
            _ => {}
        }
        resolved.push(to);
        edges.push(leads);
    }
    if !unknown_edge {
        check_reachable(ctxt, stages, &edges);
    }
    resolved
}

/// Reports a `to(..)` entry that names no stage; returns the stage it is nearest to, if any.
fn not_a_stage(
    ctxt: &Ctxt,
    stages: &StagesEnum<'_>,
    names: &[&str],
    target: &Named,
) -> Option<usize> {
    let near = crate::near::nearest(&target.text, names.iter().copied());
    let message = match near {
        Some(near) => format!(
            "`{}` is not a stage of `{}`: did you mean `{near}`?",
            target.text, stages.name
        ),
        None => format!(
            "`{}` is not a stage of `{}`: its stages are {}",
            target.text,
            stages.name,
            quoted_list(names)
        ),
    };
    ctxt.syn_error(syn::Error::new(target.span, message));
    near.and_then(|near| names.iter().position(|n| *n == near))
}

/// Every stage can be reached from the first by following `to(..)`.
fn check_reachable(ctxt: &Ctxt, stages: &StagesEnum<'_>, edges: &[Vec<usize>]) {
    let Some(first) = stages.stages.first() else {
        return;
    };
    let mut reached = vec![false; edges.len()];
    reached[0] = true;
    let mut queue = VecDeque::from([0]);
    while let Some(i) = queue.pop_front() {
        for &j in &edges[i] {
            if !reached[j] {
                reached[j] = true;
                queue.push_back(j);
            }
        }
    }
    for (i, stage) in stages.stages.iter().enumerate() {
        if reached[i] {
            continue;
        }
        // An example of a stage the call reaches: the nearest declared before this one (the
        // first always is one).
        let example = (0..i)
            .rev()
            .find(|&j| reached[j])
            .map_or(first.name.as_str(), |j| stages.stages[j].name.as_str());
        ctxt.error_spanned_by(
            stage.variant,
            format!(
                "stage `{0}` cannot be reached: no stage's `to(..)` leads to it from `{1}`, \
                 where a call starts. Add `{0}` to the `to(..)` of a stage the call reaches \
                 (`{example}`), or remove it",
                stage.name, first.name
            ),
        );
    }
}

/// `a`, `b`, `c` as `` `a`, `b`, `c` ``.
fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
