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
    tape.tool(2, "t", serde_json::json!({}), "ok", "in_turn", None);
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

#[test]
fn a_file_past_the_bound_is_refused_by_its_size_and_one_at_it_is_read() {
    use super::RecordError;
    use super::read::read_within;
    let dir = std::env::temp_dir().join(format!("voqalize-record-size-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r.jsonl");
    std::fs::write(&path, vec![b'x'; 4097]).unwrap();
    match read_within(&path, 4096) {
        Err(RecordError::TooLarge { size, limit, .. }) => {
            assert_eq!((size, limit), (Some(4097), 4096));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(read_within(&path, 4097).unwrap().len(), 4097);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pipe has no size: its read stops one byte past the bound, and the writer is left to fail.
#[cfg(unix)]
#[test]
fn a_pipe_is_read_for_at_most_the_bound_and_one_byte() {
    use super::RecordError;
    use super::read::read_within;
    use std::io::Write as _;
    let dir = std::env::temp_dir().join(format!("voqalize-record-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pipe.jsonl");
    let _ = std::fs::remove_file(&path);
    let c_path = std::ffi::CString::new(path.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo reads it and keeps nothing.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let writer_path = path.clone();
    // The writer offers 1 MiB; the reader takes 4 KiB and one byte, then closes its end.
    let writer = std::thread::spawn(move || {
        let mut pipe = std::fs::OpenOptions::new()
            .write(true)
            .open(&writer_path)
            .unwrap();
        let mut written = 0usize;
        for _ in 0..256 {
            match pipe.write(&[b'x'; 4096]) {
                Ok(n) => written += n,
                Err(_) => break,
            }
        }
        written
    });
    match read_within(&path, 4096) {
        Err(RecordError::TooLarge { size, limit, .. }) => assert_eq!((size, limit), (None, 4096)),
        other => panic!("{other:?}"),
    }
    let written = writer.join().unwrap();
    assert!(
        written < 1 << 20,
        "the writer was cut off after {written} bytes"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
