//! The conversation's rules, on its own: filing, heard truth, the bounds.
use serde_json::json;

use super::*;
use crate::model::history::{Call, PART_BYTES};
use crate::tools::Arguments;

fn call(name: &str) -> Part {
    Part::Call {
        call: Call {
            id: Some(format!("call_{name}")),
            name: name.into(),
            arguments: Arguments::Raw("{}".into()),
        },
        raw: Value::Null,
    }
}

fn result(name: &str) -> ToolResult {
    ToolResult {
        call_id: Some(format!("call_{name}")),
        name: name.into(),
        response: json!({"result": "ok"}),
    }
}

fn texts(c: &Conversation) -> Vec<String> {
    c.entries()
        .iter()
        .map(|e| {
            let parts: Vec<String> = e
                .parts
                .iter()
                .map(|p| match p {
                    // Text heard as nothing is a place-holder, not history text.
                    Part::Text { text, .. } if text.is_empty() => String::new(),
                    Part::Text { text, .. } => format!("T({text})"),
                    Part::Call { call, .. } => format!("C({})", call.name),
                    Part::Thought { .. } => "R".into(),
                    Part::Other { .. } => "O".into(),
                    Part::Result(r) => format!("=({})", r.name),
                })
                .collect();
            format!("{:?} {}", e.role, parts.join(""))
        })
        .collect()
}

#[test]
fn results_land_right_after_their_call_even_after_a_note() {
    let mut c = Conversation::new(100, 1 << 20);
    c.push_user("book Paris");
    let m = c.push(Role::Model, vec![Part::text("Opening"), call("open")]);
    c.push_user("(they tapped X)");
    let due = std::time::Instant::now();
    for ordinal in [c.call_filed(m, due), c.call_filed(m, due)] {
        c.answer(m, ordinal, result("open"));
    }
    assert_eq!(
        texts(&c),
        [
            "User T(book Paris)",
            "Model T(Opening)C(open)",
            "Results =(open)=(open)",
            "User T((they tapped X))"
        ]
    );
}

#[test]
fn a_call_answered_after_the_next_words_still_lands_after_it_once() {
    let mut c = Conversation::new(100, 1 << 20);
    c.push_user("book nine");
    let m = c.push(
        Role::Model,
        vec![
            Part::Thought {
                raw: json!({"id": "rs_1"}),
            },
            call("first"),
            call("second"),
        ],
    );
    let due = std::time::Instant::now();
    assert_eq!((c.call_filed(m, due), c.call_filed(m, due)), (0, 1));
    // The user barged in: the second call's cancellation is ready first, the first call's run
    // finishes after the user's next words.
    assert!(c.answer(m, 1, result("second")));
    c.push_user("for two");
    assert!(c.waiting());
    assert_eq!(
        texts(&c),
        [
            "User T(book nine)",
            "Model RC(first)C(second)",
            "User T(for two)"
        ]
    );
    assert!(c.answer(m, 0, result("first")));
    assert!(!c.answer(m, 0, result("first")), "answered once");
    assert!(!c.waiting());
    assert_eq!(
        texts(&c),
        [
            "User T(book nine)",
            "Model RC(first)C(second)",
            "Results =(first)=(second)",
            "User T(for two)"
        ]
    );
}

#[test]
fn a_call_past_its_due_time_is_answered_for_its_lost_run() {
    let mut c = Conversation::new(100, 1 << 20);
    let m = c.push(Role::Model, vec![call("first")]);
    let now = std::time::Instant::now();
    let later = now + std::time::Duration::from_secs(5);
    c.call_filed(m, later);
    assert_eq!(c.last_due(), Some(later));
    assert_eq!(c.answer_overdue(now, &json!({"error": "lost"})), 0);
    assert_eq!(c.answer_overdue(later, &json!({"error": "lost"})), 1);
    assert!(!c.waiting());
    let Part::Result(r) = &c.entries()[1].parts[0] else {
        panic!("{:?}", texts(&c));
    };
    assert_eq!(
        (r.call_id.as_deref(), r.response.clone()),
        (Some("call_first"), json!({"error": "lost"}))
    );
}

#[test]
fn heard_truth_keeps_the_heard_prefix_calls_and_signatures() {
    let mut c = Conversation::new(100, 1 << 20);
    let m = c.push(
        Role::Model,
        vec![
            Part::text("A. "),
            call("show"),
            Part::Text {
                text: "B.".into(),
                raw: json!({"text": "B.", "thoughtSignature": "c2ln"}),
                trimmed: false,
            },
        ],
    );
    c.speaking(7, Some(m));
    c.heard(7, "A. B", true);
    assert_eq!(texts(&c), ["Model T(A. B)C(show)O"]);
    let Part::Other { raw } = &c.entries()[0].parts[2] else {
        panic!("the signature stays")
    };
    assert_eq!(raw, &json!({"thoughtSignature": "c2ln", "text": ""}));
}

#[test]
fn nothing_heard_removes_a_text_only_turn_and_keeps_calls() {
    let mut c = Conversation::new(100, 1 << 20);
    c.push_user("Hi");
    let m = c.push(Role::Model, vec![Part::text("Would you like Friday?")]);
    c.speaking(1, Some(m));
    c.heard(1, "", true);
    assert_eq!(texts(&c), ["User T(Hi)"]);
    let m = c.push(
        Role::Model,
        vec![
            Part::Thought { raw: json!({}) },
            Part::text("A. "),
            call("x"),
        ],
    );
    c.speaking(2, Some(m));
    c.heard(2, "", true);
    assert_eq!(texts(&c), ["User T(Hi)", "Model RC(x)"]);
}

#[test]
fn a_unit_the_conversation_did_not_open_is_recorded_when_heard() {
    let mut c = Conversation::new(100, 1 << 20);
    c.heard(1, "Hello! What can I do?", false);
    c.heard(2, "", true);
    c.speaking(3, None);
    c.heard(3, "One moment.", false);
    assert_eq!(texts(&c), ["Model T(Hello! What can I do?)"]);
}

#[test]
fn strip_keeps_what_was_said_and_the_real_calls() {
    let mut c = Conversation::new(100, 1 << 20);
    let m = c.push(
        Role::Model,
        vec![
            Part::text("Opening it now. "),
            Part::text("{\"name\":"),
            call("x"),
        ],
    );
    c.strip(m, "Opening it now. ");
    assert_eq!(texts(&c), ["Model T(Opening it now. )C(x)"]);
    let m = c.push(Role::Model, vec![Part::text("```tool_code")]);
    c.strip(m, "");
    assert_eq!(texts(&c), ["Model T(Opening it now. )C(x)"]);
}

#[test]
fn the_bound_cuts_whole_exchanges() {
    let mut c = Conversation::new(8, 1 << 20);
    for i in 0..10 {
        c.push_user(&format!("q{i}"));
        let m = c.push(Role::Model, vec![call("x")]);
        let mut r = None;
        c.file(m, &mut r, result("x"));
    }
    assert!(c.entries().len() <= 8);
    assert_eq!(c.entries()[0].role, Role::User);
}

/// The total the bound reads is the entries' bytes, counted again from their parts.
fn assert_counted(c: &Conversation) {
    let counted: usize = c
        .entries()
        .iter()
        .map(|e| {
            let parts: usize = e.parts.iter().map(Part::bytes).sum();
            assert_eq!(e.bytes, parts, "entry {} counts its parts", e.id);
            parts
        })
        .sum();
    assert_eq!(c.bytes(), counted);
}

#[test]
fn consecutive_plain_text_is_one_part_and_a_signed_part_stays_its_own() {
    let mut c = Conversation::new(100, 1 << 20);
    let m = c.push(Role::Model, Vec::new());
    for piece in ["O", "p", "e", "n", "."] {
        c.extend(m, Part::text(piece));
    }
    let signed = Part::Text {
        text: "Signed".into(),
        raw: json!({"text": "Signed", "thoughtSignature": "c2ln"}),
        trimmed: false,
    };
    c.extend(m, signed.clone());
    c.extend(m, Part::text(" after"));
    c.extend(m, call("x"));
    c.extend(m, Part::text("B"));
    c.extend(m, Part::text("ye."));
    assert_eq!(texts(&c), ["Model T(Open.)T(Signed)T( after)C(x)T(Bye.)"]);
    assert_eq!(
        c.entries()[0].parts[1],
        signed,
        "the signature stays on its part"
    );
    assert_counted(&c);
    // Heard truth still works on the joined text.
    c.speaking(1, Some(m));
    c.heard(1, "Op", true);
    assert_eq!(texts(&c), ["Model T(Op)OC(x)"]);
    assert_counted(&c);
}

#[test]
fn a_million_one_byte_deltas_are_one_part_of_a_million_bytes() {
    let mut c = Conversation::new(100, usize::MAX);
    let m = c.push(Role::Model, Vec::new());
    for _ in 0..1_000_000 {
        c.extend(m, Part::text("a"));
    }
    assert_eq!(c.entries()[0].parts.len(), 1);
    // The text, and one part: not a part a delta.
    assert_eq!(c.bytes(), 1_000_000 + PART_BYTES);
}

#[test]
fn the_byte_bound_cuts_whole_exchanges_and_keeps_the_one_in_progress() {
    // An exchange of a kilobyte of text holds about 2 KiB: three fit in 8 KiB.
    let mut c = Conversation::new(400, 8192);
    let kilobyte = "k".repeat(1000);
    for i in 0..10 {
        c.push_user(&format!("q{i}"));
        let m = c.push(Role::Model, vec![Part::text(kilobyte.clone()), call("x")]);
        let mut r = None;
        c.file(m, &mut r, result("x"));
        assert_counted(&c);
        assert!(c.bytes() <= 8192, "{} bytes after exchange {i}", c.bytes());
        assert_eq!(c.entries()[0].role, Role::User);
    }
    assert_eq!(texts(&c)[0], "User T(q7)");
    // One exchange over the bound on its own stays whole, its user turn first.
    c.push_user("big");
    let m = c.push(Role::Model, vec![Part::text("b".repeat(20_000)), call("x")]);
    let mut r = None;
    c.file(m, &mut r, result("x"));
    assert_eq!(
        texts(&c)
            .iter()
            .map(|t| t.split(' ').next().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["User", "Model", "Results"]
    );
    assert_eq!(texts(&c)[0], "User T(big)");
    assert_counted(&c);
}

/// A part costs what it takes held, not its few bytes on the wire: ten thousand `{"a":0}`
/// parts (80 KB sent) count some 5 MB, so a 1 MiB bound keeps a few thousand of them at most.
#[test]
fn tiny_json_parts_count_what_they_cost_held() {
    let mut c = Conversation::new(400, 1 << 20);
    c.push_user("go");
    let m = c.push(Role::Model, Vec::new());
    for _ in 0..10_000 {
        c.extend(
            m,
            Part::Other {
                raw: json!({"a": 0}),
            },
        );
    }
    assert_counted(&c);
    assert!(c.bytes() > 10_000 * 500, "{} bytes", c.bytes());
    c.push_user("next");
    assert_eq!(
        texts(&c),
        ["User T(next)"],
        "the old exchange no longer fits"
    );
}

#[test]
fn lines_without_a_user_turn_are_bounded_in_bytes_too() {
    let mut c = Conversation::new(400, 4096);
    let heard = "h".repeat(3000);
    for id in 0..5 {
        c.heard(id, &heard, false);
    }
    assert_eq!(c.entries().len(), 1, "only the newest line fits");
    assert_counted(&c);
}

#[test]
fn answers_strips_and_removals_keep_the_count() {
    let mut c = Conversation::new(100, 1 << 20);
    c.push_user("go");
    let m = c.push(
        Role::Model,
        vec![
            Part::text("A. "),
            Part::Thought {
                raw: json!({"id": "rs_1"}),
            },
            call("first"),
            call("second"),
        ],
    );
    let due = std::time::Instant::now();
    c.call_filed(m, due);
    c.call_filed(m, due);
    c.answer(m, 1, result("second"));
    assert_counted(&c);
    c.answer(m, 0, result("first"));
    assert_counted(&c);
    c.strip(m, "");
    assert_counted(&c);
    c.heard(1, "", true);
    assert_counted(&c);
    assert_eq!(
        texts(&c),
        [
            "User T(go)",
            "Model C(first)C(second)",
            "Results =(first)=(second)"
        ]
    );
}

#[test]
fn a_note_keeps_the_exchange_in_progress_whole_within_twice_the_bound() {
    let mut c = Conversation::new(400, 8192);
    c.push_user("old");
    c.push(Role::Model, vec![Part::text("o".repeat(1000))]);
    c.push_user("look it up");
    let m = c.push(Role::Model, vec![call("lookup")]);
    let due = std::time::Instant::now();
    let ordinal = c.call_filed(m, due);
    let mut big = result("lookup");
    big.response = json!({"result": "x".repeat(9000)});
    c.answer(m, ordinal, big);
    // The exchange alone is past the bound: what came before it went.
    assert_eq!(texts(&c)[0], "User T(look it up)");
    c.push_note("(mail sent)");
    assert_eq!(
        texts(&c),
        [
            "User T(look it up)",
            "Model C(lookup)",
            "Results =(lookup)",
            "User T((mail sent))"
        ],
        "a note is no place to cut the exchange it joins"
    );
    assert_counted(&c);
    // Notes without end: past twice the bound a note is a place to cut after all.
    for i in 0..100 {
        c.push_note(&format!("({i}: {})", "n".repeat(500)));
        assert!(c.bytes() <= 2 * 8192, "{} bytes after note {i}", c.bytes());
    }
    assert_counted(&c);
    assert!(!texts(&c).contains(&"User T(look it up)".to_owned()));
}

#[test]
fn a_restart_keeps_only_the_note_and_what_came_after_the_mark() {
    let mut c = Conversation::new(400, 1 << 20);
    c.push_user("I'm Ana");
    let model = c.push(Role::Model, vec![Part::text("Checking."), call("verify")]);
    c.speaking(1, Some(model));
    let mark = c.mark();
    c.push_user("hello?");
    c.restart(mark, "(moved)");
    assert_eq!(texts(&c), ["User T((moved))", "User T(hello?)"]);
    assert_eq!(
        c.bytes(),
        c.entries().iter().map(|e| e.bytes).sum::<usize>()
    );
    // The unit that spoke a removed entry finds it gone: nothing changes.
    c.heard(1, "Check", true);
    assert_eq!(texts(&c), ["User T((moved))", "User T(hello?)"]);
}

#[test]
fn the_heard_transcript_leaves_out_units_still_speaking_calls_and_results_and_keeps_its_newest_bytes()
 {
    let mut c = Conversation::new(400, 1 << 20);
    c.push_user("I'm Ana");
    let heard = c.push(Role::Model, vec![Part::text("Hello Ana."), call("find")]);
    c.speaking(1, Some(heard));
    c.heard(1, "Hello Ana.", false);
    c.push_user("Book me in");
    let speaking = c.push(Role::Model, vec![Part::text("One moment.")]);
    c.speaking(2, Some(speaking));
    assert_eq!(
        c.heard_transcript(1000),
        "Caller: I'm Ana\nAgent: Hello Ana.\nCaller: Book me in\n"
    );
    assert_eq!(c.heard_transcript(24), "Ana.\nCaller: Book me in\n");
}

/// A heard exchange: the caller's words and the agent's answer, finalized as heard whole.
fn exchange(c: &mut Conversation, said: &str, answer: &str, unit: u64) {
    c.push_user(said);
    let m = c.push(Role::Model, vec![Part::text(answer)]);
    c.speaking(unit, Some(m));
    c.heard(unit, answer, false);
}

#[test]
fn a_summary_replaces_heard_exchanges_and_keeps_pins_and_calls_verbatim() {
    let mut c = Conversation::new(100, 1 << 20);
    exchange(&mut c, "I'm Ana", "Hi Ana", 1);
    c.pin("(Order 4411.)", 8, 8 * 1024);
    c.push_user("where is it?");
    let m = c.push(Role::Model, vec![Part::text("Checking."), call("track")]);
    let mut r = None;
    c.file(m, &mut r, result("track"));
    exchange(&mut c, "thanks", "You're welcome", 2);
    // Still speaking: neither it nor what follows is summarised.
    c.push_user("and the refund?");
    let unheard = c.push(Role::Model, vec![Part::text("Let me see")]);
    c.speaking(3, Some(unheard));
    c.push_user("hello?");

    let w = c.window((0, 0), (0, 0), 32 * 1024).expect("a window");
    assert_eq!(
        w.transcript,
        "Caller: I'm Ana\nAgent: Hi Ana\nCaller: where is it?\nCaller: thanks\nAgent: You're welcome\n"
    );
    assert_eq!(w.previous, None);
    assert!(c.replace(&w, "Ana, order 4411, asked where it is."));
    assert_eq!(
        texts(&c),
        [
            "User T((Earlier in this call, summarised: Ana, order 4411, asked where it is.))",
            "User T((Order 4411.))",
            "Model T(Checking.)C(track)",
            "Results =(track)",
            "User T(and the refund?)",
            "Model T(Let me see)",
            "User T(hello?)",
        ]
    );
    assert_counted(&c);
    assert_eq!(
        c.summary_text(),
        Some("Ana, order 4411, asked where it is.")
    );
}

#[test]
fn a_later_summary_folds_in_the_previous_one_and_entries_dropped_meanwhile_are_no_matter() {
    let mut c = Conversation::new(100, 1 << 20);
    for i in 0..4 {
        exchange(&mut c, &format!("q{i}"), &format!("a{i}"), i);
    }
    c.push_user("now");
    let w = c.window((0, 0), (0, 0), 32 * 1024).expect("a window");
    assert!(c.replace(&w, "first"));
    for i in 4..8 {
        exchange(&mut c, &format!("q{i}"), &format!("a{i}"), i);
    }
    let w = c.window((0, 0), (0, 0), 32 * 1024).expect("a window");
    assert_eq!(w.previous.as_deref(), Some("first"));
    assert!(
        w.transcript.starts_with("Caller: now\n"),
        "{}",
        w.transcript
    );
    // The bound drops some of what the window chose before the summary comes back.
    c.max_entries = 8;
    for i in 8..12 {
        exchange(&mut c, &format!("q{i}"), &format!("a{i}"), i);
    }
    assert!(c.replace(&w, "second"));
    let t = texts(&c);
    assert_eq!(
        t[0], "User T((Earlier in this call, summarised: second))",
        "{t:#?}"
    );
    assert_eq!(
        t.iter().filter(|l| l.contains("summarised")).count(),
        1,
        "{t:#?}"
    );
    assert!(t.len() <= 8, "{t:#?}");
    assert_counted(&c);
}

#[test]
fn a_restart_since_the_window_makes_its_summary_stale() {
    let mut c = Conversation::new(100, 1 << 20);
    exchange(&mut c, "q", "a", 1);
    c.push_user("now");
    let w = c.window((0, 0), (0, 0), 32 * 1024).expect("a window");
    let mark = c.mark();
    c.restart(mark, "(moved)");
    assert!(!c.replace(&w, "old news"));
    assert_eq!(texts(&c), ["User T((moved))"]);
}

#[test]
fn the_bounds_drop_around_the_summary_and_the_pins() {
    let mut c = Conversation::new(8, 1 << 20);
    exchange(&mut c, "I'm Ana", "Hi", 1);
    c.pin("(Order 4411.)", 8, 8 * 1024);
    c.push_user("go on");
    let w = c.window((0, 0), (0, 0), 32 * 1024).expect("a window");
    assert!(c.replace(&w, "Ana called."));
    for i in 2..40 {
        exchange(&mut c, &format!("q{i}"), &format!("a{i}"), i);
    }
    let t = texts(&c);
    assert!(t.len() <= 8, "{t:#?}");
    assert_eq!(
        t[0],
        "User T((Earlier in this call, summarised: Ana called.))"
    );
    assert_eq!(t[1], "User T((Order 4411.))");
    assert_eq!(t.last().map(String::as_str), Some("Model T(a39)"));
    assert_counted(&c);
}

#[test]
fn pins_are_bounded_in_count_and_bytes_the_oldest_unpinned() {
    let mut c = Conversation::new(1000, 1 << 20);
    for i in 0..12 {
        c.pin(&format!("(pin {i})"), 8, 8 * 1024);
    }
    assert_eq!(c.pinned.len(), 8);
    assert!(!c.kept(c.entries()[0].id), "the oldest is unpinned");
    c.pin(&"x".repeat(1 << 20), 8, 8 * 1024);
    let bytes: usize = c
        .entries()
        .iter()
        .filter(|e| c.kept(e.id))
        .map(|e| e.bytes)
        .sum();
    assert!(bytes <= 8 * 1024, "{bytes}");
    assert!(c.kept(c.entries().last().expect("the pin").id));
}

#[test]
fn a_summary_after_a_restart_replaces_every_entry_it_covers() {
    let mut c = Conversation::new(100, 1 << 20);
    exchange(&mut c, "I'm Ana", "Hi Ana", 1);
    // A move in a turn: the caller's words that started it stay, after the note, so the
    // note's id is past theirs.
    c.push_user("Billing, please");
    let mark = c.exchange_start();
    let m = c.push(Role::Model, vec![Part::text("Moving you.")]);
    c.speaking(2, Some(m));
    c.heard(2, "Moving you.", false);
    c.restart(mark, "(moved)");
    for i in 3..8 {
        exchange(&mut c, &format!("q{i}"), &format!("a{i}"), i);
    }
    c.push_user("now");
    let w = c.window((0, 0), (0, 0), 32 * 1024).expect("a window");
    assert!(c.replace(&w, "Ana moved to billing."));
    assert_eq!(
        texts(&c),
        [
            "User T((Earlier in this call, summarised: Ana moved to billing.))",
            "User T(now)"
        ]
    );
    assert_counted(&c);
}

#[test]
fn a_second_restart_in_the_same_exchange_keeps_the_caller_s_words() {
    let mut c = Conversation::new(100, 1 << 20);
    c.push_user("Billing, then refunds");
    let first = c.exchange_start();
    c.push(Role::Model, vec![call("to_billing")]);
    c.restart(first, "(moved to billing)");
    let second = c.exchange_start();
    c.push(Role::Model, vec![call("to_refunds")]);
    c.restart(second, "(moved to refunds)");
    assert!(
        texts(&c).contains(&"User T(Billing, then refunds)".to_owned()),
        "{:#?}",
        texts(&c)
    );
}

#[test]
fn pins_never_hold_the_history_past_its_own_bounds() {
    let mut c = Conversation::new(8, 2048);
    for i in 0..8 {
        c.pin(&format!("({i}: {})", "p".repeat(1000)), 8, 8 * 1024);
    }
    exchange(&mut c, "and now?", "Noted.", 1);
    assert!(c.bytes() <= 2048, "{} bytes", c.bytes());
    assert!(c.entries().len() <= 8, "{:#?}", texts(&c));
    assert_counted(&c);
}

/// The Gemini body of the next request on `c`: built with what the conversation kept rendered,
/// and with every entry rendered now. Both must be the same bytes.
fn gemini_body(c: &Conversation) -> String {
    use crate::model::Gemini;
    use crate::model::history::{RequestSpec, ToolChoice};
    use crate::model::layer::Layer;
    let layer = Gemini::builder("k").build().expect("a layer");
    let tools = crate::tools::ToolSet::empty();
    let build = |rendered| {
        let spec = RequestSpec {
            instruction: None,
            history: c.entries(),
            note: None,
            tools: &tools,
            choice: &ToolChoice::Auto,
            rendered,
        };
        let body = layer.build(&spec).expect("a request").body;
        String::from_utf8(body.to_vec()).expect("JSON text")
    };
    let kept = build(Some(c.rendered()));
    assert_eq!(kept, build(None), "what was kept rendered is stale");
    kept
}

#[test]
fn a_request_copies_the_turns_it_rendered_before_until_they_change() {
    let mut c = Conversation::new(100, 1 << 20);
    c.push_user("book Paris");
    gemini_body(&c);
    assert_eq!(c.rendered().kept(), 1, "the user's words, before the turn");

    let m = c.push(
        Role::Model,
        vec![Part::text("Opening the form now"), call("open")],
    );
    c.speaking(7, Some(m));
    let ordinal = c.call_filed(m, std::time::Instant::now());
    c.answer(m, ordinal, result("open"));
    gemini_body(&c);
    assert_eq!(
        c.rendered().kept(),
        1,
        "the turn's own entries are not kept"
    );
    c.push(Role::Model, vec![Part::text("It is open.")]);

    c.push_user("and Rome");
    gemini_body(&c);
    assert_eq!(c.rendered().kept(), 5);

    // Heard truth rewrites a turn already kept: it is rendered again, as heard.
    c.heard(7, "Opening the", true);
    let body = gemini_body(&c);
    assert!(body.contains("\"Opening the\""), "{body}");
    assert!(!body.contains("form now"), "{body}");

    // Words said while a tool ran join a kept turn.
    c.say_before_calls(m, " (one moment)");
    assert!(gemini_body(&c).contains("(one moment)"));

    // A note merges into the user's content; a restart and the bound move entries.
    c.push_note("(they tapped Rome)");
    gemini_body(&c);
    let mark = c.exchange_start();
    c.restart(mark, "(moved to the booking desk)");
    gemini_body(&c);
    for i in 0..200 {
        c.push_user(&format!("turn {i}"));
        let m = c.push(Role::Model, vec![Part::text(format!("answer {i}"))]);
        c.strip(m, if i % 3 == 0 { "" } else { "answer" });
        gemini_body(&c);
    }
    assert!(c.rendered().kept() <= c.entries().len());
}

#[test]
fn what_is_kept_rendered_stays_within_the_history_byte_bound() {
    let mut c = Conversation::new(1000, 4096);
    for i in 0..100 {
        c.push_user(&format!("{i}: {}", "\u{1}".repeat(100)));
        gemini_body(&c);
        let kept = c.rendered().slot_bytes();
        assert!(kept <= 4096, "{kept} bytes kept");
    }
}

/// A small deterministic generator for the operation sequences below (xorshift).
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}

#[test]
fn kept_renderings_match_fresh_ones_through_any_sequence_of_changes() {
    for seed in 1..=40u64 {
        let mut dice = Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut c = Conversation::new(40, 6 * 1024);
        let mut models: Vec<EntryId> = Vec::new();
        let mut speech = 0;
        for step in 0..150 {
            match dice.roll(11) {
                0..=2 => {
                    c.push_user(&format!("user {step} \"quoted\" \u{1}"));
                }
                3 => {
                    c.push_note(&format!("(note {step})"));
                }
                4 | 5 => {
                    let mut parts = vec![Part::text(format!("answer {step} with words"))];
                    if dice.roll(2) == 0 {
                        parts.push(call(&format!("tool{step}")));
                    }
                    let m = c.push(Role::Model, parts);
                    speech += 1;
                    c.speaking(speech, Some(m));
                    models.push(m);
                }
                6 => {
                    if let Some(&m) = models.last() {
                        let ordinal = c.call_filed(m, std::time::Instant::now());
                        c.answer(m, ordinal, result("tool"));
                    }
                }
                7 => {
                    let heard = ["", "answer", "answer 1 with"][dice.roll(3) as usize];
                    c.heard(
                        speech.saturating_sub(dice.roll(3)),
                        heard,
                        dice.roll(2) == 0,
                    );
                }
                8 => {
                    if let Some(&m) = models.get(dice.roll(models.len().max(1) as u64) as usize) {
                        c.say_before_calls(m, " (a moment)");
                    }
                }
                9 => {
                    if let Some(&m) = models.last() {
                        c.strip(m, ["", "answer"][dice.roll(2) as usize]);
                    }
                }
                _ => {
                    if dice.roll(4) == 0 {
                        let mark = c.exchange_start();
                        c.restart(mark, "(moved)");
                    } else {
                        c.answer_overdue(
                            std::time::Instant::now() + std::time::Duration::from_secs(3600),
                            &json!({"error": "gone"}),
                        );
                    }
                }
            }
            if dice.roll(3) != 0 {
                gemini_body(&c);
            }
        }
        gemini_body(&c);
        assert!(c.rendered().slot_bytes() <= 6 * 1024);
    }
}
