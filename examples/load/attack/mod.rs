//! Hostile peers (`--attack NAME`): each plays one misbehaving relay, provider or caller against
//! the brain beside a bystander call, then reports the brain's RSS (with `--brain-pid`) and its
//! log (with `--brain-log`: lines written during the attack, and the longest).
//!
//! Each attack lives in its own file and is listed in [`ATTACKS`].

/// Every attack: its name, what it does, and how to run it.
type Run = for<'a> fn(
    &'a crate::Args,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), Box<dyn std::error::Error>>> + 'a>,
>;

mod relay;

/// The attacks by name, with one line each for `--attack list`.
const ATTACKS: &[(&str, &str, Run)] = &[
    (
        "relay-silent",
        "the relay goes silent, then sends half a frame and goes silent again",
        relay::silent,
    ),
    (
        "relay-accept-close",
        "the relay accepts and closes at once (1011, EOF) for 20 s",
        relay::accept_close,
    ),
    (
        "relay-oversized",
        "1.5 MiB frames for running sessions and unknown prefixes beside a bystander",
        relay::oversized,
    ),
    (
        "relay-never-reads",
        "20 sessions ask for --turns 900 KB answers each; the relay reads none",
        relay::never_reads,
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
