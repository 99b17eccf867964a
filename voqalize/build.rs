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

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("catalog.rs"), catalog(&pool)?)?;
    std::fs::write(out_dir.join("wire_enums.rs"), wire_enums(&pool)?)?;
    Ok(())
}

/// How a generated `name()` spells a member: `speech_cancel` or `ui-command`.
#[derive(Clone, Copy)]
enum Spelling {
    Snake,
    Kebab,
}

/// Writes the number tables (`number`, `from_number`, `name`) of the wire enums whose Rust types are
/// declared by hand in `src/wire/frames.rs` (with their docs): the member list and numbers come
/// from the .proto, so a member added there and not in Rust (or the reverse) fails the build.
fn wire_enums(pool: &DescriptorPool) -> Result<String, Box<dyn std::error::Error>> {
    // (proto enum, Rust type, value prefix, the Rust member for 0 if it has one, name spelling)
    let enums = [
        (
            "voqalize.frames.Capability",
            "Capability",
            "CAPABILITY_",
            None,
            Spelling::Snake,
        ),
        (
            "voqalize.frames.ErrorCode",
            "ErrorCode",
            "ERROR_CODE_",
            Some("Unknown"),
            Spelling::Snake,
        ),
        (
            "voqalize.frames.RTVIType",
            "RtviType",
            "RTVI_TYPE_",
            None,
            Spelling::Kebab,
        ),
    ];
    let mut code = String::new();
    for (proto, rust, prefix, zero, spelling) in enums {
        let en = pool
            .get_enum_by_name(proto)
            .ok_or_else(|| format!("{proto} missing from frames.proto"))?;
        let mut rows = Vec::new();
        for value in en.values().filter(|v| v.number() != 0) {
            let bare = value
                .name()
                .strip_prefix(prefix)
                .ok_or_else(|| format!("{} does not start with {prefix}", value.name()))?;
            let variant = camel(bare);
            let name = match spelling {
                Spelling::Snake => bare.to_lowercase(),
                Spelling::Kebab => bare.to_lowercase().replace('_', "-"),
            };
            rows.push((variant, value.number(), name));
        }
        writeln!(code, "impl {rust} {{")?;
        writeln!(
            code,
            "    /// Every member, in wire-number order.\n    pub const ALL: [{rust}; {}] = [",
            rows.len() + usize::from(zero.is_some())
        )?;
        if let Some(z) = zero {
            writeln!(code, "        {rust}::{z},")?;
        }
        for (variant, ..) in &rows {
            writeln!(code, "        {rust}::{variant},")?;
        }
        writeln!(code, "    ];\n")?;
        writeln!(
            code,
            "    /// The wire number (from frames.proto).\n    pub const fn number(self) -> i32 {{\n        match self {{"
        )?;
        if let Some(z) = zero {
            writeln!(code, "            {rust}::{z} => 0,")?;
        }
        for (variant, number, _) in &rows {
            writeln!(code, "            {rust}::{variant} => {number},")?;
        }
        writeln!(code, "        }}\n    }}\n")?;
        match zero {
            Some(z) => {
                writeln!(
                    code,
                    "    /// The member for a wire number: 0 and numbers this build does not know give `{z}`.\n    pub const fn from_number(n: i32) -> Self {{\n        match n {{"
                )?;
                for (variant, number, _) in &rows {
                    writeln!(code, "            {number} => {rust}::{variant},")?;
                }
                writeln!(code, "            _ => {rust}::{z},\n        }}\n    }}\n")?;
            }
            None => {
                writeln!(
                    code,
                    "    /// The member for a wire number; `None` for 0 or a number this build does not know.\n    pub const fn from_number(n: i32) -> Option<Self> {{\n        match n {{"
                )?;
                for (variant, number, _) in &rows {
                    writeln!(code, "            {number} => Some({rust}::{variant}),")?;
                }
                writeln!(code, "            _ => None,\n        }}\n    }}\n")?;
            }
        }
        writeln!(
            code,
            "    /// The member's name as logs and the other SDKs spell it (from frames.proto).\n    pub const fn name(self) -> &'static str {{\n        match self {{"
        )?;
        if let Some(z) = zero {
            writeln!(code, "            {rust}::{z} => {:?},", z.to_lowercase())?;
        }
        for (variant, _, name) in &rows {
            writeln!(code, "            {rust}::{variant} => {name:?},")?;
        }
        writeln!(code, "        }}\n    }}\n}}\n")?;
    }
    Ok(code)
}

/// `UI_COMMAND` → `UiCommand`.
fn camel(upper_snake: &str) -> String {
    upper_snake
        .split('_')
        .map(|w| {
            let lower = w.to_lowercase();
            let mut c = lower.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
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
            let variant = camel(value.name().trim_start_matches(&prefix));
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
