//! [`Folder`]: where a [`Recorder::to_dir`](super::Recorder::to_dir) writes its files, made
//! private to its owner when the SDK makes it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// A recorder's folder. Shared by the recorder's clones and the tapes it made: the warning about
/// an existing folder that others can list is written once for all of them.
#[derive(Debug)]
pub(super) struct Folder {
    path: PathBuf,
    /// The folder's mode was looked at (once, at the first file written).
    checked: AtomicBool,
}

impl Folder {
    pub(super) fn new(path: PathBuf) -> Self {
        Folder {
            path,
            checked: AtomicBool::new(false),
        }
    }

    /// Writes `text` to a new file of the folder named `name` (`name-1`, `name-2`... when taken:
    /// a recording never overwrites another), readable by its owner only. A missing folder is
    /// made (with any missing parent) readable and listable by its owner only, as its files are:
    /// their names hold session ids. An existing one keeps its mode; on unix, one warning per
    /// recorder says so when other users can list it. Blocking: run it on a blocking thread.
    pub(super) fn write_new(&self, name: &str, text: &str) -> std::io::Result<PathBuf> {
        use std::io::Write as _;
        let existed = self.path.is_dir();
        make_private_dir(&self.path)?;
        if existed && !self.checked.swap(true, Ordering::Relaxed) {
            warn_if_listable(&self.path);
        }
        let stem = name.strip_suffix(".jsonl").unwrap_or(name);
        for n in 0..1000 {
            let path = if n == 0 {
                self.path.join(name)
            } else {
                self.path.join(format!("{stem}-{n}.jsonl"))
            };
            let mut open = std::fs::OpenOptions::new();
            open.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
            match open.open(&path) {
                Ok(mut file) => return file.write_all(text.as_bytes()).map(|()| path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("1,000 recordings named {stem} already"),
        ))
    }
}

/// Makes `dir` and its missing parents, each `0700` on unix (an existing one is left as it is).
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Warns when users other than the owner may list `dir` (its mode grants the group or others any
/// right): the files are private, but their names hold the calls' session ids.
fn warn_if_listable(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(meta) = std::fs::metadata(dir) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "record: the folder {} is mode {mode:04o}: other users can list the \
                     recordings' names, which hold session ids (the files themselves are 0600); \
                     `chmod 700` it, or let the recorder make it",
                    dir.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}
