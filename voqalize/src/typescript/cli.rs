//! The `voqalize types` command: its arguments, its usage, and where the module goes.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::generate::{TypeScript, TypesError};

impl TypeScript {
    /// The command: `types [--out FILE [--check]]` (the arguments after the program name). Without
    /// `--out` the module goes to `stdout`; with it, to FILE; with `--check`, FILE is compared
    /// instead of written. `--help` (or `-h`, or `help`) anywhere prints the usage to `stdout`.
    ///
    /// # Errors
    /// A usage error, a duplicate name, an I/O error, or a stale file under `--check`.
    pub fn run<I, S>(&self, args: I, stdout: &mut dyn Write) -> Result<(), TypesError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let invocation = self.invocation.clone().unwrap_or_else(|| invocation(None));
        let bad = |what: String| TypesError::Usage(format!("{what}\n{}", usage(&invocation)));
        let stdout_error = |source| TypesError::Io {
            path: PathBuf::from("<stdout>"),
            source,
        };
        if args.first().is_some_and(|a| a == "help")
            || args.iter().any(|a| a == "--help" || a == "-h")
        {
            return stdout
                .write_all(usage(&invocation).as_bytes())
                .map_err(stdout_error);
        }
        let mut args = args.into_iter();
        match args.next().as_deref() {
            Some("types") => {}
            Some(other) => return Err(bad(format!("unknown command `{other}`"))),
            None => return Err(bad("no command given".into())),
        }
        let mut out_path = None;
        let mut check = false;
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--out" | "-o" => match args.next() {
                    Some(p) => out_path = Some(PathBuf::from(p)),
                    None => return Err(bad("--out needs a file".into())),
                },
                "--check" => check = true,
                other => return Err(bad(format!("unknown argument `{other}`"))),
            }
        }
        let module = self.render()?;
        let io = |path: &PathBuf| {
            let path = path.clone();
            move |source| TypesError::Io { path, source }
        };
        match (out_path, check) {
            (None, true) => Err(bad("--check needs --out FILE".into())),
            (None, false) => stdout.write_all(module.as_bytes()).map_err(stdout_error),
            (Some(path), true) => {
                let current = std::fs::read_to_string(&path).map_err(io(&path))?;
                if current == module {
                    Ok(())
                } else {
                    let command = format!("{invocation} types --out {}", path.display());
                    Err(TypesError::Stale { path, command })
                }
            }
            (Some(path), false) => std::fs::write(&path, module).map_err(io(&path)),
        }
    }

    /// [`run`](Self::run) on the process's arguments and stdout; errors go to stderr. The usage
    /// and the `--check` failure name the program as Cargo runs it (`cargo run --bin NAME --`,
    /// or `--example NAME`), from its path.
    pub fn main(&self) -> ExitCode {
        let mut args = std::env::args();
        let mut this = self.clone();
        this.invocation = Some(invocation(args.next().as_deref()));
        match this.run(args, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("voqalize types: {}", crate::logline::chain(&e));
                ExitCode::FAILURE
            }
        }
    }
}

/// How the user runs this program, e.g. `cargo run --bin voqalize --`: named in the usage and
/// in the `--check` failure.
pub(super) fn invocation(argv0: Option<&str>) -> String {
    let path = std::path::Path::new(argv0.unwrap_or("voqalize"));
    let name = path
        .file_stem()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("voqalize");
    // Cargo puts examples in `target/<profile>/examples/`.
    let kind = match path.parent().and_then(|p| p.file_name()) {
        Some(dir) if dir == "examples" => "example",
        _ => "bin",
    };
    format!("cargo run --{kind} {name} --")
}

fn usage(invocation: &str) -> String {
    format!(
        "usage: {invocation} types [--out FILE [--check]]\n\
         \n\
         Writes the TypeScript of the brain's UI commands and app events.\n\
         \n\
         \x20 (no --out)   print the module to stdout\n\
         \x20 --out FILE   write it to FILE (also -o)\n\
         \x20 --check      with --out: write nothing, fail when FILE is not what would be written\n\
         \x20 --help       print this help (also -h)\n"
    )
}
