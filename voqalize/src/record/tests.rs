use super::{Recorder, file_name};
use crate::wire::{self, Frame};

#[test]
fn a_peer_chosen_session_id_makes_a_safe_file_name() {
    let name = file_name(Some("../../etc/passwd\n\u{1b}[31m"));
    let (ms, rest) = name.split_once('-').unwrap();
    assert!(ms.chars().all(|c| c.is_ascii_digit()), "{name}");
    assert_eq!(rest, "______etc_passwd___31m.jsonl");
    let long = file_name(Some(&"x".repeat(500)));
    assert!(long.len() < 100, "{long}");
    assert!(file_name(None).ends_with("-no-session.jsonl"));
}

#[tokio::test]
async fn a_tape_stops_at_its_bound_with_one_truncated_line() {
    let recorder = Recorder::in_memory().max_bytes(4096);
    let tape = recorder.tape(None).unwrap();
    let chunk = Frame::SpeechChunk {
        speech_id: 1,
        text: "a".repeat(300),
    };
    let bytes = wire::encode(&chunk);
    for _ in 0..40 {
        tape.frame_out(&bytes, chunk.name());
    }
    assert_eq!(tape.room(), 0);
    tape.tool(
        2,
        "t",
        serde_json::json!({}),
        "ok",
        crate::tools::RunEnd::InTurn,
    );
    tape.finish().await;
    let recordings = recorder.take().unwrap();
    assert_eq!(recordings.len(), 1);
    let r = &recordings[0];
    assert!(r.truncated);
    assert!(r.tool_runs.is_empty(), "nothing after the cut");
    assert!(
        r.frames.len() > 5 && r.frames.len() < 40,
        "{}",
        r.frames.len()
    );
    assert!(r.frames.iter().all(|f| f.frame == chunk));
}

#[cfg(feature = "model")]
#[test]
fn a_line_past_the_bound_never_grows_the_buffer() {
    let recorder = Recorder::in_memory().max_bytes(4096);
    let tape = recorder.tape(None).unwrap();
    // A 1 MiB frame, then a 1 MiB response of control bytes (6 MiB once escaped).
    tape.frame_out(&vec![0u8; 1 << 20], "SpeechChunk");
    tape.model(super::Exchanged {
        sent_ms: 0,
        provider: "p",
        model: "m",
        url: "http://h/x",
        request: b"{}",
        status: Some(200),
        response: &vec![1u8; 1 << 20],
        error: None,
    });
    assert!(
        tape.held() < 8192,
        "a 4 KiB recording holds {} bytes",
        tape.held()
    );
}
