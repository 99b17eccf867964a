//! One console call's bookkeeping: what the page asks for, as the frames Voqalize would send, and
//! what the brain sends, as the page's events. No sockets here (`bridge` moves the bytes).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::wire::{Frame, Response, Rtvi, RtviType, SessionStart, UserMessage};

/// What a page may send, one JSON object per WebSocket text message (the module docs list them).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum FromPage {
    /// The user said (or typed) `text`: the next turn's UserMessage.
    Say { text: String },
    /// The user talks over the brain: Interruption through the newest turn.
    Interrupt {},
    /// What the user heard of a unit: its Finalize.
    Finalize { speech_id: u64, heard: String },
    /// An app event: RTVI `ui-event` with `{"event": name, "payload": payload}`.
    AppEvent {
        name: String,
        #[serde(default)]
        payload: Value,
    },
    /// Hang up: End, then the socket closes.
    End {},
}

/// A unit the brain opened and the page has not finalized yet.
struct Unit {
    /// What the brain generated, kept up to [`Limits::unit_text_bytes`].
    text: String,
}

/// The console's bounds on one call (the page and the brain are both outside this process).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Generated text kept per unit to check heard text against (the rest is still shown).
    pub(super) unit_text_bytes: usize,
    /// Units open at once; past it the oldest is forgotten (its Finalize is then refused).
    pub(super) open_units: usize,
    /// Generated text kept over all open units of the call.
    pub(super) call_text_bytes: usize,
}

/// One call: the turn counter, the open units, and what to answer.
pub(super) struct Call {
    turn: u64,
    units: BTreeMap<u64, Unit>,
    /// Bytes of text kept over `units`.
    kept: usize,
    limits: Limits,
    /// Protocol mistakes of the brain already noticed (each kind is told the page once).
    noticed: Vec<&'static str>,
}

/// What one message from either side turns into.
#[derive(Default)]
pub(super) struct Out {
    /// Frames for the brain, in order.
    pub(super) to_brain: Vec<Frame>,
    /// Events for the page, in order.
    pub(super) to_page: Vec<Value>,
    /// The call is over: close both sides after sending the above.
    pub(super) done: bool,
}

impl Call {
    pub(super) fn new(limits: Limits) -> Self {
        Call {
            turn: 1,
            units: BTreeMap::new(),
            kept: 0,
            limits,
            noticed: Vec::new(),
        }
    }

    /// The SessionStart that opens the call (turn 1, which the greeting answers).
    pub(super) fn start(&self, session_id: &str, init: serde_json::Map<String, Value>) -> Out {
        let mut start = SessionStart::new(session_id, 1);
        start.init = init;
        Out {
            to_brain: vec![Frame::SessionStart(start)],
            to_page: vec![
                json!({"type": "session", "session_id": session_id}),
                json!({"type": "turn", "turn_id": 1, "text": null}),
            ],
            done: false,
        }
    }

    /// A message from the page. A malformed one is answered with a `notice` and changes nothing.
    pub(super) fn page_sent(&mut self, text: &str) -> Out {
        let message = match serde_json::from_str::<FromPage>(text) {
            Ok(m) => m,
            Err(e) => {
                return notice(format!(
                    "the console could not read the page's message: {e}"
                ));
            }
        };
        match message {
            FromPage::Say { text } => {
                self.turn += 1;
                Out {
                    to_brain: vec![Frame::UserMessage(UserMessage::new(
                        self.turn,
                        text.clone(),
                    ))],
                    to_page: vec![json!({"type": "turn", "turn_id": self.turn, "text": text})],
                    done: false,
                }
            }
            FromPage::Interrupt {} => Out {
                to_brain: vec![Frame::Interruption {
                    through_turn: self.turn,
                }],
                to_page: vec![json!({"type": "interrupted", "through_turn": self.turn})],
                done: false,
            },
            FromPage::Finalize { speech_id, heard } => {
                let Some(unit) = self.units.remove(&speech_id) else {
                    return notice(format!(
                        "no Finalize sent for speech {speech_id}: it is not open"
                    ));
                };
                self.kept -= unit.text.len();
                // What Voqalize guarantees of heard text: a prefix of what the unit generated.
                let heard = heard[..crate::session::shared_prefix(&heard, &unit.text)].to_owned();
                Out {
                    to_page: vec![
                        json!({"type": "finalized", "speech_id": speech_id, "heard": heard}),
                    ],
                    to_brain: vec![Frame::Finalize {
                        speech_id,
                        heard_text: heard,
                    }],
                    done: false,
                }
            }
            FromPage::AppEvent { name, payload } => Out {
                to_page: vec![json!({"type": "app_event", "name": name, "payload": payload})],
                to_brain: vec![Frame::Rtvi(Rtvi {
                    kind: RtviType::UiEvent,
                    data: Some(json!({"event": name, "payload": payload})),
                    id: None,
                    turn_id: None,
                })],
                done: false,
            },
            FromPage::End {} => Out {
                to_brain: vec![Frame::End],
                to_page: vec![json!({"type": "ended_by_user"})],
                done: true,
            },
        }
    }

    /// A unit opens: kept (the oldest dropped past `open_units`), and shown.
    fn speech_start(&mut self, speech_id: u64, turn_id: u64) -> Out {
        let mut out = Out::default();
        if self.units.contains_key(&speech_id) {
            self.once(&mut out, "a SpeechStart for a speech id already open");
            return out;
        }
        if self.units.len() >= self.limits.open_units
            && let Some((_, old)) = self.units.pop_first()
        {
            self.kept -= old.text.len();
        }
        self.units.insert(
            speech_id,
            Unit {
                text: String::new(),
            },
        );
        out.to_page
            .push(json!({"type": "speech_start", "speech_id": speech_id, "turn_id": turn_id}));
        out
    }

    /// A unit's text: kept within the unit's and the call's bounds, and shown whole.
    fn speech_chunk(&mut self, speech_id: u64, text: String) -> Out {
        let Some(unit) = self.units.get_mut(&speech_id) else {
            let mut out = Out::default();
            self.once(&mut out, "a SpeechChunk for a unit that is not open");
            return out;
        };
        let room = self
            .limits
            .unit_text_bytes
            .saturating_sub(unit.text.len())
            .min(self.limits.call_text_bytes.saturating_sub(self.kept));
        let kept = &text[..text.floor_char_boundary(room)];
        unit.text.push_str(kept);
        self.kept += kept.len();
        Out {
            to_page: vec![json!({"type": "chunk", "speech_id": speech_id, "text": text})],
            ..Out::default()
        }
    }

    /// A frame from the brain, as the page's event (and, for `configure`, the acceptance Voqalize
    /// would send back).
    pub(super) fn brain_sent(&mut self, frame: Frame) -> Out {
        let event = match frame {
            Frame::SpeechStart { speech_id, turn_id } => {
                return self.speech_start(speech_id, turn_id);
            }
            Frame::SpeechChunk { speech_id, text } => return self.speech_chunk(speech_id, text),
            Frame::SpeechEnd { speech_id } => {
                json!({"type": "speech_end", "speech_id": speech_id})
            }
            Frame::SpeechCancel { speech_id } => {
                json!({"type": "speech_cancel", "speech_id": speech_id})
            }
            Frame::Request {
                request_id,
                configure,
            } => {
                return Out {
                    to_brain: vec![Frame::Response(Response::new(request_id, true, "", None))],
                    to_page: vec![json!({
                        "type": "configure",
                        "request_id": request_id,
                        "config": format!("{configure:?}"),
                    })],
                    done: false,
                };
            }
            Frame::Rtvi(r) => json!({
                "type": "rtvi",
                "kind": r.kind.to_string(),
                "data": r.data,
                "turn_id": r.turn_id,
            }),
            Frame::TurnStep(t) => json!({
                "type": "turn_step",
                "turn_id": t.turn_id,
                "kind": t.kind,
                "name": t.name,
                "provider": t.provider,
                "start_ms": t.start_ms,
                "duration_ms": t.duration_ms,
                "first_output_ms": t.first_output_ms,
                "counts": t.counts,
            }),
            Frame::Error(e) => json!({
                "type": "error",
                "code": e.code.to_string(),
                "message": e.message,
                "fatal": e.fatal,
            }),
            // Voqalize ends the call when the brain does: the console closes its socket.
            Frame::End => {
                return Out {
                    to_page: vec![json!({"type": "end"})],
                    done: true,
                    ..Out::default()
                };
            }
            other => {
                return notice(format!(
                    "the brain sent {}, a frame only Voqalize sends",
                    other.name()
                ));
            }
        };
        Out {
            to_page: vec![event],
            ..Out::default()
        }
    }
}

impl Call {
    /// Tells the page of a protocol mistake of the brain, the first time it makes it.
    pub(super) fn once(&mut self, out: &mut Out, mistake: &'static str) {
        if !self.noticed.contains(&mistake) {
            self.noticed.push(mistake);
            out.to_page.push(json!({
                "type": "notice",
                "text": format!("the brain sent {mistake} (Voqalize would ignore it; told once)"),
            }));
        }
    }
}

/// A console message for the page's timeline.
pub(super) fn notice(text: String) -> Out {
    Out {
        to_page: vec![json!({"type": "notice", "text": text})],
        ..Out::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            unit_text_bytes: 16,
            open_units: 2,
            call_text_bytes: 24,
        }
    }

    #[test]
    fn heard_text_is_cut_to_what_the_unit_generated() {
        let mut call = Call::new(limits());
        call.brain_sent(Frame::SpeechStart {
            speech_id: 1,
            turn_id: 1,
        });
        call.brain_sent(Frame::SpeechChunk {
            speech_id: 1,
            text: "héllo there".into(),
        });
        let out =
            call.page_sent(r#"{"type":"finalize","speech_id":1,"heard":"héllo thX and more"}"#);
        assert_eq!(
            out.to_brain,
            vec![Frame::Finalize {
                speech_id: 1,
                heard_text: "héllo th".into()
            }]
        );
        // One Finalize per unit: a second is refused.
        let again = call.page_sent(r#"{"type":"finalize","speech_id":1,"heard":""}"#);
        assert!(again.to_brain.is_empty());
        assert_eq!(again.to_page[0]["type"], "notice");
    }

    #[test]
    fn kept_text_and_open_units_are_bounded() {
        let mut call = Call::new(limits());
        for id in 1..=3 {
            call.brain_sent(Frame::SpeechStart {
                speech_id: id,
                turn_id: 1,
            });
        }
        call.brain_sent(Frame::SpeechChunk {
            speech_id: 3,
            text: "ééééééééééé".into(), // 22 bytes
        });
        assert_eq!(call.units.len(), 2);
        assert!(!call.units.contains_key(&1));
        assert_eq!(call.units[&3].text, "éééééééé");
        // The call's bound: 24 bytes over its units, 16 of them taken.
        call.brain_sent(Frame::SpeechChunk {
            speech_id: 2,
            text: "abcdefghijklmnop".into(),
        });
        assert_eq!(call.units[&2].text, "abcdefgh");
        assert_eq!(call.kept, 24);
        call.page_sent(r#"{"type":"finalize","speech_id":3,"heard":""}"#);
        assert_eq!(call.kept, 8, "a finalized unit's text is let go");
        // A repeated SpeechStart, or text for a unit never opened: told once, forwarded never.
        for _ in 0..2 {
            let out = call.brain_sent(Frame::SpeechStart {
                speech_id: 2,
                turn_id: 1,
            });
            assert!(out.to_page.len() <= 1);
        }
        assert_eq!(call.units[&2].text, "abcdefgh", "not reset");
        let out = call.brain_sent(Frame::SpeechChunk {
            speech_id: 99,
            text: "x".into(),
        });
        assert_eq!(out.to_page[0]["type"], "notice");
        let again = call.brain_sent(Frame::SpeechChunk {
            speech_id: 99,
            text: "x".into(),
        });
        assert!(again.to_page.is_empty());
    }

    #[test]
    fn a_bad_page_message_changes_nothing() {
        let mut call = Call::new(limits());
        for bad in [
            "",
            "{}",
            r#"{"type":"say"}"#,
            r#"{"type":"say","text":"x","extra":1}"#,
            r#"{"type":"interrupt","extra":1}"#,
        ] {
            let out = call.page_sent(bad);
            assert!(out.to_brain.is_empty(), "{bad}");
            assert_eq!(out.to_page[0]["type"], "notice");
        }
        let out = call.page_sent(r#"{"type":"say","text":"hi"}"#);
        assert_eq!(
            out.to_brain,
            vec![Frame::UserMessage(UserMessage::new(2, "hi"))]
        );
        let out = call.page_sent(r#"{"type":"interrupt"}"#);
        assert_eq!(out.to_brain, vec![Frame::Interruption { through_turn: 2 }]);
    }
}
