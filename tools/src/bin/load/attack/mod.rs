//! Hostile peers (`--attack NAME`): each plays one misbehaving relay, provider or caller against
//! the brain beside a bystander call, then reports the brain's RSS (with `--brain-pid`) and its
//! log (with `--brain-log`: lines written during the attack, and the longest).
//!
//! Each attack lives in its own file and is listed in [`ATTACKS`].

mod caller;
mod provider;
mod relay;

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
    (
        "provider-arguments",
        "a provider streams one call's arguments as 900 fragments of 1 MB",
        provider::arguments,
    ),
    (
        "provider-calls",
        "a provider answers every request with 10,000 calls to a needs-result-now tool",
        provider::calls,
    ),
    (
        "provider-deltas",
        "a provider streams 5,000,000 one-byte text deltas",
        provider::deltas,
    ),
    (
        "provider-keepalive",
        "a provider says a few words, then sends keep-alives and never ends",
        provider::keep_alive,
    ),
    (
        "provider-error",
        "a provider reports a 3 MB error message holding a newline and an ESC",
        provider::error,
    ),
    (
        "provider-names",
        "a model calls 16 tools a reply whose 16 KB names hold a newline and an ESC",
        provider::names,
    ),
    (
        "provider-badargs",
        "a model calls a tool 16 times a reply with a 60 KB argument that does not fit",
        provider::bad_arguments,
    ),
    (
        "provider-tiny-parts",
        "a provider answers with 120,000 tiny unknown parts in one 960 KB event (Gemini)",
        provider::tiny_parts,
    ),
    (
        "provider-tiny-objects",
        "a provider answers with one part of 120,000 tiny objects, 960 KB (Gemini)",
        provider::tiny_objects,
    ),
    (
        "provider-control",
        "no attack: the same callers and bystander, every request answered as usual",
        provider::control,
    ),
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
