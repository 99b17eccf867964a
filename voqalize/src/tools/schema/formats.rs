//! schemars' non-standard number formats (`uint8`, `int64`, `double`...): dropped, and for Gemini
//! the `minimum`/`maximum` that only restate the integer type's range go with them.

use serde_json::{Map, Value};

/// schemars' format names that are not JSON Schema formats.
fn nonstandard_number_format(format: &str) -> bool {
    matches!(
        format,
        "int" | "uint" | "float" | "double" | "int8" | "int16" | "int32" | "int64" | "int128"
    ) || format.starts_with("uint") && format[4..].chars().all(|c| c.is_ascii_digit())
}

/// The range schemars states for a Rust integer type beside its format (`uint8` → 0..=255).
fn implied_range(format: &str) -> (Option<i128>, Option<i128>) {
    match format {
        "uint8" => (Some(0), Some(u8::MAX.into())),
        "uint16" => (Some(0), Some(u16::MAX.into())),
        "uint32" => (Some(0), Some(u32::MAX.into())),
        "uint64" => (Some(0), Some(u64::MAX.into())),
        "uint" | "uint128" => (Some(0), None),
        "int8" => (Some(i8::MIN.into()), Some(i8::MAX.into())),
        "int16" => (Some(i16::MIN.into()), Some(i16::MAX.into())),
        "int32" => (Some(i32::MIN.into()), Some(i32::MAX.into())),
        "int64" => (Some(i64::MIN.into()), Some(i64::MAX.into())),
        _ => (None, None),
    }
}

/// Drops a non-standard number `format`; with `bounds`, also the `minimum`/`maximum` that only
/// restate the integer type's range (Gemini wants `{"type":"integer","nullable":true}` for an
/// `Option<u8>`).
pub(super) fn drop_number_format(m: &mut Map<String, Value>, bounds: bool) {
    let Some(Value::String(f)) = m.get("format").cloned() else {
        return;
    };
    if !nonstandard_number_format(&f) {
        return;
    }
    m.remove("format");
    if bounds {
        let (min, max) = implied_range(&f);
        for (key, implied) in [("minimum", min), ("maximum", max)] {
            let stated = m.get(key).and_then(|v| {
                v.as_i64()
                    .map(i128::from)
                    .or_else(|| v.as_u64().map(i128::from))
            });
            if implied.is_some() && stated == implied {
                m.remove(key);
            }
        }
    }
}
