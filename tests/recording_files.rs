//! Recording files on disk: the folder a recorder makes is its owner's only, an existing one keeps
//! its mode (with one warning when others can list it), and a file too large to read is refused
//! by its size before a byte of it is read.

use std::path::{Path, PathBuf};

use voqalize::prelude::*;
use voqalize::record::{MAX_RECORDING_FILE_BYTES, RecordError, Recorder, Recording};

use crate::support::driver_with;

struct Echo;

impl Brain for Echo {
    async fn on_user_message(&self, turn: &mut Turn, m: UserMessage) -> BrainResult {
        turn.say(&m.text);
        Ok(())
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("voqalize-files-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One short call recorded by `recorder`.
async fn one_call(recorder: &Recorder) {
    let options = HostOptions::builder()
        .allow_unverified()
        .record(recorder.clone())
        .build()
        .expect("options");
    let mut v = driver_with(|| Echo, options).await;
    v.start_silent().await.unwrap();
    v.user_says("hello").await.unwrap();
    v.end().await.unwrap();
    v.brain_result().await.unwrap().unwrap();
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[tokio::test]
async fn the_folder_a_recorder_makes_is_its_owners_only_and_an_existing_one_is_left_as_it_is() {
    use std::os::unix::fs::PermissionsExt as _;
    let logs = crate::support::logs();
    // Made by the recorder, with a missing parent: neither can be listed by another user.
    let root = fresh_dir("made");
    let dir = root.join("calls");
    one_call(&Recorder::to_dir(&dir)).await;
    assert_eq!(mode(&root), 0o700, "the parent it made");
    assert_eq!(mode(&dir), 0o700, "the folder it made");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    assert_eq!(mode(&files[0]), 0o600);
    assert!(
        logs.lines_with(&dir.display().to_string()).is_empty(),
        "no warning about a folder it made: {:?}",
        logs.lines_with(&dir.display().to_string())
    );

    // Made by the operator, listable by all: left as it is, and said once per recorder.
    let open = fresh_dir("existing");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let recorder = Recorder::to_dir(&open);
    one_call(&recorder).await;
    one_call(&recorder.clone()).await;
    assert_eq!(mode(&open), 0o755, "an existing folder keeps its mode");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 2);
    let warned = logs.lines_with(&format!("the folder {} is mode 0755", open.display()));
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("chmod 700"), "{}", warned[0]);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&open);
}

#[test]
fn a_file_past_the_bound_is_refused_by_its_size_unread() {
    let dir = fresh_dir("large");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.jsonl");
    // A sparse file one MiB past the bound: its size says it all, nothing of it need be read.
    let size = MAX_RECORDING_FILE_BYTES + (1 << 20);
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    let e = Recording::open(&path).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains(&format!(
            "is {size} bytes, over the {MAX_RECORDING_FILE_BYTES} bytes"
        )),
        "{shown}"
    );
    assert!(
        matches!(e, RecordError::TooLarge { size: Some(s), .. } if s == size),
        "{e:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
