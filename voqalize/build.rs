//! Generates the wire types from `proto/voqalize/frames/frames.proto` (prost-build fed by protox, so no
//! system `protoc` is needed) and the Language and Voice tables from the `iso_code` / `voice_id`
//! enum-value options of the same file. The .proto is the one source of both.

use std::fmt::Write as _;
use std::path::PathBuf;

use prost_reflect::{DescriptorPool, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest.join("../proto");
    let proto_file = proto_root.join("voqalize/frames/frames.proto");
    println!("cargo:rerun-if-changed={}", proto_file.display());

    let mut compiler = protox::Compiler::new([&proto_root])?;
    compiler.include_imports(true);
    compiler.open_file("voqalize/frames/frames.proto")?;
    let pool = compiler.descriptor_pool();
    let fds = compiler.file_descriptor_set();

    let mut config = prost_build::Config::new();
    config.btree_map(["."]);
    config.compile_fds(fds)?;

    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("catalog.rs");
    std::fs::write(out, catalog(&pool)?)?;
    Ok(())
}

/// Writes `Language` and `Voice`: one variant per non-zero enum value, with its wire number and the
/// string carried by its option.
fn catalog(pool: &DescriptorPool) -> Result<String, Box<dyn std::error::Error>> {
    let mut code = String::new();
    for (enum_name, option, type_name, method, doc) in [
        (
            "voqalize.frames.Language",
            "voqalize.frames.iso_code",
            "Language",
            "iso_code",
            "A language of the deprecated wire catalog (`Language` enum), with its ISO code.\n\n\
             Prefer a BCP-47 tag string (`language_tag` on the wire) where the runtime advertises \
             `string_config`.",
        ),
        (
            "voqalize.frames.Voice",
            "voqalize.frames.voice_id",
            "Voice",
            "voice_id",
            "A voice of the deprecated wire catalog (`Voice` enum), with its voice id.\n\n\
             Prefer a voice id string (`voice_id` on the wire) where the runtime advertises \
             `string_config`.",
        ),
    ] {
        let en = pool
            .get_enum_by_name(enum_name)
            .ok_or_else(|| format!("{enum_name} missing from frames.proto"))?;
        let ext = pool
            .get_extension_by_name(option)
            .ok_or_else(|| format!("{option} missing from frames.proto"))?;
        let prefix = format!("{}_", en.name().to_uppercase());
        let mut rows = Vec::new();
        for value in en.values().filter(|v| v.number() != 0) {
            let opts = value.options();
            let label = match opts.get_extension(&ext).as_ref() {
                Value::String(s) if !s.is_empty() => s.clone(),
                _ => return Err(format!("{} has no {option} option", value.name()).into()),
            };
            let variant: String = value
                .name()
                .trim_start_matches(&prefix)
                .split('_')
                .map(|w| {
                    let lower = w.to_lowercase();
                    let mut c = lower.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect::<String>())
                        .unwrap_or_default()
                })
                .collect();
            rows.push((variant, value.number(), label, value.name().to_string()));
        }
        for line in doc.lines() {
            writeln!(code, "///{}{line}", if line.is_empty() { "" } else { " " })?;
        }
        writeln!(
            code,
            "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[non_exhaustive]\npub enum {type_name} {{"
        )?;
        for (variant, number, label, name) in &rows {
            writeln!(
                code,
                "    /// `{name}` = {number}: `{label}`.\n    {variant},"
            )?;
        }
        writeln!(code, "}}\n\nimpl {type_name} {{")?;
        writeln!(
            code,
            "    /// Every member, in wire-number order.\n    pub const ALL: &'static [{type_name}] = &["
        )?;
        for (variant, ..) in &rows {
            writeln!(code, "        {type_name}::{variant},")?;
        }
        writeln!(code, "    ];\n")?;
        writeln!(
            code,
            "    /// The wire number (never 0).\n    pub const fn number(self) -> i32 {{\n        match self {{"
        )?;
        for (variant, number, ..) in &rows {
            writeln!(code, "            {type_name}::{variant} => {number},")?;
        }
        writeln!(code, "        }}\n    }}\n")?;
        writeln!(
            code,
            "    /// The member with this wire number; `None` for 0 or a number this build does not know.\n    pub const fn from_number(number: i32) -> Option<Self> {{\n        match number {{"
        )?;
        for (variant, number, ..) in &rows {
            writeln!(
                code,
                "            {number} => Some({type_name}::{variant}),"
            )?;
        }
        writeln!(code, "            _ => None,\n        }}\n    }}\n")?;
        writeln!(
            code,
            "    /// The `{method}` option of this member in frames.proto.\n    pub const fn {method}(self) -> &'static str {{\n        match self {{"
        )?;
        for (variant, _, label, _) in &rows {
            writeln!(code, "            {type_name}::{variant} => {label:?},")?;
        }
        writeln!(code, "        }}\n    }}\n")?;
        writeln!(
            code,
            "    /// The member whose `{method}` is `s`, if any.\n    pub fn from_{method}(s: &str) -> Option<Self> {{\n        Self::ALL.iter().copied().find(|m| m.{method}() == s)\n    }}\n}}\n"
        )?;
    }
    Ok(code)
}
