//! Hostile peers (`--attack NAME`): each plays one misbehaving relay, provider or caller against
//! the brain beside a bystander call, then reports the brain's RSS (with `--brain-pid`) and its
//! log (with `--brain-log`: lines written during the attack, and the longest).
//!
//! Each attack lives in its own file and is listed in [`ATTACKS`].

mod caller;

/// A running attack.
pub type Attack<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), Box<dyn std::error::Error>>> + 'a>,
>;

/// Every attack: its name, what it does, and how to run it.
type Run = for<'a> fn(&'a crate::Args) -> Attack<'a>;

/// The attacks by name, with one line each for `--attack list`.
const ATTACKS: &[(&str, &str, Run)] = &[
    (
        "caller-strays",
        "direct leg: Responses for requests the brain never made, at line rate",
        caller::strays,
    ),
    (
        "caller-restarts",
        "direct leg: SessionStart again and again, never reading the answers",
        caller::restarts,
    ),
    (
        "caller-forged-finalize",
        "direct leg: 300 Finalizes for units never opened, 1 MB of heard text each",
        caller::forged,
    ),
    (
        "caller-brain-rtvi",
        "direct leg: RTVI types only the brain sends, inbound at line rate",
        caller::brain_rtvi,
    ),
    (
        "caller-flood",
        "direct leg: UserMessages at line rate, never reading (again on each new call)",
        caller::flood,
    ),
];

/// Runs the attack called `name`, or lists them.
pub async fn attack(args: &crate::Args, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    if name == "list" {
        for (name, what, _) in ATTACKS {
            println!("{name:24} {what}");
        }
        return Ok(());
    }
    match ATTACKS.iter().find(|(n, _, _)| *n == name) {
        Some((_, _, run)) => run(args).await,
        None => Err(format!("no attack named {name:?}; `--attack list` names them").into()),
    }
}

/// What the brain's log says since `from` bytes: how many lines, and the longest in bytes.
#[allow(dead_code)] // used by the attacks that read the brain's log
pub fn log_since(path: &std::path::Path, from: u64) -> std::io::Result<(usize, usize)> {
    use std::io::{BufRead, Seek};
    let mut file = std::fs::File::open(path)?;
    file.seek(std::io::SeekFrom::Start(from))?;
    let (mut lines, mut longest) = (0, 0);
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line?;
        lines += 1;
        longest = longest.max(line.len());
    }
    Ok((lines, longest))
}

/// The brain's log size in bytes now (the attack counts from here).
#[allow(dead_code)]
pub fn log_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
