//! The generated TypeScript, compiled as an app would use it: `tsc --strict` over the file the
//! generator writes for a brain's Actions and AppEvents and over `tests/fixtures/typescript/app.ts`
//! (a pipecat-style client using every helper), then the app run under Node, whose checks must
//! all hold. `scripts/test-all` installs TypeScript from the npm registry into `target/npm` when it
//! is missing (`VOQALIZE_TSC` names another `tsc`).

use std::path::{Path, PathBuf};
use std::process::Command;

use voqalize::prelude::*;
use voqalize::typescript::TypeScript;

/// Which part of the screen to show.
#[json_type]
#[serde(rename_all = "lowercase")]
enum SectionName {
    Today,
    Week,
}

/// How fast to scroll.
#[json_type]
enum Speed {
    Slow = 1,
    Fast = 2,
}

/// Put a section in front of the user.
#[json_type]
#[derive(Action)]
struct ShowSection {
    /// The section.
    name: SectionName,
    /// A line under its title.
    note: Option<String>,
}

/// Scroll the list.
#[json_type]
#[derive(Action)]
struct Scroll {
    speed: Speed,
    rows: u32,
}

/// Sign the user out.
#[json_type]
#[derive(Action)]
struct Logout {}

/// What the app tells the brain.
#[derive(AppEvent)]
#[allow(dead_code)] // the types are only rendered here
enum Ui {
    /// A row was tapped.
    Tapped { row: u32, label: Option<String> },
    /// The sheet was closed.
    Closed {},
}

#[test]
fn the_generated_file_compiles_strict_and_works_in_an_app() {
    let ts = TypeScript::new()
        .action::<ShowSection>()
        .action::<Scroll>()
        .action::<Logout>()
        .event::<Ui>()
        .render()
        .expect("the types render");
    let dir = std::env::temp_dir().join(format!("voqalize-ts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    std::fs::write(dir.join("voqalize.ts"), &ts).expect("voqalize.ts written");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/typescript/app.ts");
    std::fs::copy(&fixture, dir.join("app.ts")).expect("app.ts copied");

    let tsc = tsc();
    let compiled = Command::new(&tsc)
        .current_dir(&dir)
        .args([
            "--strict",
            "--noUnusedLocals",
            "--noImplicitReturns",
            "--exactOptionalPropertyTypes",
            "--target",
            "es2022",
            "--module",
            "commonjs",
            "--outDir",
            "out",
            "app.ts",
            "voqalize.ts",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", tsc.display()));
    assert!(
        compiled.status.success(),
        "tsc --strict failed:\n{}{}\n--- voqalize.ts ---\n{ts}",
        String::from_utf8_lossy(&compiled.stdout),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let ran = Command::new("node")
        .current_dir(&dir)
        .arg("out/app.js")
        .output()
        .expect("node starts");
    assert!(
        ran.status.success(),
        "the app's checks failed:\n{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout).trim(),
        "app.ts: every check held"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `$VOQALIZE_TSC`, or the TypeScript that `scripts/test-all` installs into `target/npm`.
fn tsc() -> PathBuf {
    let tsc = std::env::var_os("VOQALIZE_TSC")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/npm/node_modules/.bin/tsc")
        });
    assert!(
        tsc.exists(),
        "{} is missing: scripts/test-all installs TypeScript there \
         (npm install --prefix target/npm typescript), or point VOQALIZE_TSC at a tsc",
        tsc.display()
    );
    tsc
}
