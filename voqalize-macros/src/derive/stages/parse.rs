//! Reads the enum: its shape, each variant's doc comment and `#[stage(...)]`, and the enum's
//! `#[stages(...)]`. A grammar mistake goes to the `Ctxt` and reading goes on past it, so every
//! mistake in the enum is reported at once.

use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DataEnum, DeriveInput, Expr, ExprLit, Fields, Lit, LitStr, Meta, Path, Token,
    Variant, token,
};

use super::{Named, Stage, StagesEnum};
use crate::ctxt::Ctxt;
use crate::near::nearest;
use crate::text::{type_text, valid_function_name};

/// `#[stage(...)]`: the helper attribute on a variant.
const STAGE: &str = "stage";
/// `#[stages(...)]`: the helper attribute on the enum.
const STAGES: &str = "stages";
/// A doc comment (`///` is `#[doc = "..."]`): the stage's instruction.
const DOC: &str = "doc";
/// The keys of `#[stage(...)]`, in the order the docs list them.
const STAGE_KEYS: [&str; 4] = ["tools", "to", "mcp", "end"];
/// The keys of `#[stages(...)]`.
const STAGES_KEYS: [&str; 1] = ["every"];

/// The enum as read, or `None` when it is not an enum (reported).
pub(super) fn read<'a>(ctxt: &Ctxt, input: &'a DeriveInput) -> Option<StagesEnum<'a>> {
    let data = check_enum(ctxt, input)?;
    let mut usable = true;
    if !input.generics.params.is_empty() {
        ctxt.error_spanned_by(
            &input.generics,
            "a `Stages` enum cannot be generic: its variants are a call's stages, one fixed set \
             per brain; remove the generic parameters",
        );
        usable = false;
    }
    if data.variants.is_empty() {
        ctxt.syn_error(syn::Error::new(
            data.brace_token.span.join(),
            "a `Stages` enum needs at least one variant: each variant is a stage, and the first \
             is where a call starts",
        ));
    }
    let mut every = Vec::new();
    for attr in &input.attrs {
        if attr.path().is_ident(STAGE) {
            ctxt.error_spanned_by(
                attr,
                "`#[stage(...)]` goes on a variant (one stage); on the enum, \
                 `#[stages(every(..))]` names the tools of every stage",
            );
        } else if attr.path().is_ident(STAGES) {
            read_stages_attr(ctxt, attr, &mut every);
        }
    }
    let stages = data
        .variants
        .iter()
        .map(|v| {
            if !matches!(v.fields, Fields::Unit) {
                ctxt.error_spanned_by(
                    &v.fields,
                    "a stage is a unit variant (`Verify`), without fields: what a stage knows \
                     lives in the brain, and what crosses into the next stage is a \
                     transition's carried note",
                );
                usable = false;
            }
            read_stage(ctxt, v)
        })
        .collect();
    Some(StagesEnum {
        ident: &input.ident,
        name: input.ident.unraw().to_string(),
        every,
        stages,
        usable,
    })
}

fn check_enum<'a>(ctxt: &Ctxt, input: &'a DeriveInput) -> Option<&'a DataEnum> {
    let at = match &input.data {
        Data::Enum(data) => return Some(data),
        Data::Struct(s) => s.struct_token.span,
        Data::Union(u) => u.union_token.span,
    };
    ctxt.syn_error(syn::Error::new(
        at,
        "`#[derive(Stages)]` goes on a fieldless enum, one variant per stage: \
         `enum Clinic { Verify, Booking, Confirm }`",
    ));
    None
}

/// `#[stages(every(a, b))]` on the enum.
fn read_stages_attr(ctxt: &Ctxt, attr: &Attribute, every: &mut Vec<Named>) {
    if !matches!(attr.meta, Meta::List(_)) {
        ctxt.error_spanned_by(
            attr,
            "write `#[stages(every(a, b))]`: the tools offered in every stage",
        );
        return;
    }
    let parsed = attr.parse_nested_meta(|meta| {
        let key = type_text(&meta.path);
        if key != "every" {
            ctxt.syn_error(meta.error(unknown_key(STAGES, &key, &STAGES_KEYS, "`every(..)`")));
            return skip_value(&meta);
        }
        if let Some(entries) = list(ctxt, &meta, "every", "every(hang_up)")? {
            let names = entries.into_iter().filter_map(|e| tool_name(ctxt, e));
            extend_once(ctxt, every, names, "every(..)");
        }
        Ok(())
    });
    if let Err(e) = parsed {
        ctxt.syn_error(e);
    }
}

/// One variant: its doc comment and its `#[stage(...)]`.
fn read_stage<'a>(ctxt: &Ctxt, variant: &'a Variant) -> Stage<'a> {
    let name = variant.ident.unraw().to_string();
    let instruction = match instruction(&variant.attrs) {
        Ok(Some(text)) => text,
        Ok(None) => {
            ctxt.error_spanned_by(
                &variant.ident,
                format!(
                    "stage `{name}` has no doc comment: its doc comment is what the model is \
                     told in this stage (its instruction)"
                ),
            );
            String::new()
        }
        Err(e) => {
            ctxt.syn_error(e);
            String::new()
        }
    };
    let mut stage = Stage {
        variant: &variant.ident,
        name,
        instruction,
        tools: Vec::new(),
        to: Vec::new(),
        mcp: Vec::new(),
        end: None,
        garbled: false,
    };
    let mut seen = false;
    for attr in &variant.attrs {
        if attr.path().is_ident(STAGES) {
            ctxt.error_spanned_by(
                attr,
                "`#[stages(...)]` goes on the enum; on a variant, write `#[stage(...)]`",
            );
        } else if attr.path().is_ident(STAGE) {
            if seen {
                ctxt.error_spanned_by(
                    attr,
                    format!(
                        "`#[stage]` is given twice on `{}`: write one `#[stage(...)]` with all \
                         its keys",
                        stage.name
                    ),
                );
            }
            seen = true;
            read_stage_attr(ctxt, attr, &mut stage);
        }
    }
    stage
}

/// `#[stage(tools(..), to(..), mcp(..), end)]`, keys in any order, each at most once.
fn read_stage_attr(ctxt: &Ctxt, attr: &Attribute, stage: &mut Stage<'_>) {
    if !matches!(attr.meta, Meta::List(_)) {
        ctxt.error_spanned_by(
            attr,
            "write `#[stage(...)]` with its keys: `tools(a, b)`, `to(NextStage)`, \
             `mcp(toolset)`, `end`",
        );
        stage.garbled = true;
        return;
    }
    let mut keys: Vec<&'static str> = Vec::new();
    let parsed = attr.parse_nested_meta(|meta| {
        let key = type_text(&meta.path);
        let Some(known) = STAGE_KEYS.iter().copied().find(|k| *k == key) else {
            let listed = "`tools(..)`, `to(..)`, `mcp(..)`, `end`";
            ctxt.syn_error(meta.error(unknown_key(STAGE, &key, &STAGE_KEYS, listed)));
            stage.garbled = true;
            return skip_value(&meta);
        };
        if keys.contains(&known) {
            ctxt.syn_error(meta.error(format!(
                "`{known}` is given twice in `#[stage]`: write it once"
            )));
        }
        keys.push(known);
        match known {
            "tools" => {
                if let Some(entries) = list(ctxt, &meta, "tools", "tools(find_patient, book)")? {
                    let names = entries.into_iter().filter_map(|e| tool_name(ctxt, e));
                    extend_once(ctxt, &mut stage.tools, names, "tools(..)");
                }
            }
            "to" => {
                // An entry that does not read leaves the way out unknown.
                let Some(entries) = list(ctxt, &meta, "to", "to(Booking)")? else {
                    stage.garbled = true;
                    return Ok(());
                };
                let written = entries.len();
                let names: Vec<Named> = entries
                    .into_iter()
                    .filter_map(|e| stage_name(ctxt, e))
                    .collect();
                stage.garbled |= names.len() < written;
                extend_once(ctxt, &mut stage.to, names, "to(..)");
            }
            "mcp" => {
                if let Some(entries) = list(ctxt, &meta, "mcp", "mcp(crm)")? {
                    let names = entries.into_iter().filter_map(|e| toolset_name(ctxt, e));
                    extend_once(ctxt, &mut stage.mcp, names, "mcp(..)");
                }
            }
            _ => {
                if meta.input.peek(token::Paren) || meta.input.peek(Token![=]) {
                    ctxt.syn_error(meta.error("`end` takes no value: write `#[stage(end)]`"));
                    skip_value(&meta)?;
                }
                stage.end.get_or_insert(meta.path.span());
            }
        }
        Ok(())
    });
    if let Err(e) = parsed {
        ctxt.syn_error(e);
        stage.garbled = true;
    }
}

/// The error for a key the attribute does not know, with the nearest known one suggested.
fn unknown_key(helper: &str, written: &str, keys: &[&'static str], listed: &str) -> String {
    match nearest(written, keys.iter().copied()) {
        Some(near) => format!(
            "unknown `#[{helper}]` key `{written}`: did you mean `{near}`? (the keys are \
             {listed})"
        ),
        None => format!("unknown `#[{helper}]` key `{written}`: the keys are {listed}"),
    }
}

/// Passes over what follows a key (`(...)` or `= value`), so reading goes on at the next key.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(token::Paren) {
        meta.input.parse::<proc_macro2::Group>()?;
    } else if meta.input.peek(Token![=]) {
        meta.input.parse::<Token![=]>()?;
        meta.input.parse::<Expr>()?;
    }
    Ok(())
}

/// One entry of a list, before its key says what it may be.
enum Entry {
    Path(Path),
    Lit(LitStr),
}

impl Parse for Entry {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(LitStr) {
            input.parse().map(Entry::Lit)
        } else {
            Path::parse_mod_style(input).map(Entry::Path)
        }
    }
}

/// `key(a, b, ...)`: `None` when the key is not followed by parentheses (reported).
fn list(
    ctxt: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    key: &str,
    example: &str,
) -> syn::Result<Option<Vec<Entry>>> {
    if !meta.input.peek(token::Paren) {
        ctxt.syn_error(meta.error(format!(
            "write `{key}(..)` with its names in parentheses: `{example}`"
        )));
        skip_value(meta)?;
        return Ok(None);
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let entries = Punctuated::<Entry, Token![,]>::parse_terminated(&content)?;
    Ok(Some(entries.into_iter().collect()))
}

/// A plain name (`book`, `r#type`), unrawed; `None` for a path.
fn plain(path: &Path) -> Option<Named> {
    path.get_ident().map(|i| Named {
        text: i.unraw().to_string(),
        span: i.span(),
    })
}

/// A tool's name: `book`, or `"a.b-c"` for a tool named so with `#[tool(name = "...")]`.
fn tool_name(ctxt: &Ctxt, entry: Entry) -> Option<Named> {
    let named = match entry {
        Entry::Lit(lit) => Named {
            text: lit.value(),
            span: lit.span(),
        },
        Entry::Path(path) => match plain(&path) {
            Some(named) => named,
            None => {
                ctxt.error_spanned_by(
                    &path,
                    "name a tool by its name alone (`find_patient`), as the brain declares it",
                );
                return None;
            }
        },
    };
    if !valid_function_name(&named.text) {
        ctxt.syn_error(syn::Error::new(
            named.span,
            format!(
                "`{}` is not a tool name: a tool's name matches \
                 `^[A-Za-z_][A-Za-z0-9_.-]{{0,63}}$`",
                named.text
            ),
        ));
        return None;
    }
    Some(named)
}

/// A stage, by its variant's name alone.
fn stage_name(ctxt: &Ctxt, entry: Entry) -> Option<Named> {
    let named = match &entry {
        Entry::Path(path) => plain(path),
        Entry::Lit(_) => None,
    };
    if named.is_none() {
        let example = match &entry {
            Entry::Path(path) => path.segments.last().map(|s| s.ident.unraw().to_string()),
            Entry::Lit(lit) => Some(lit.value()),
        };
        let example = example.unwrap_or_else(|| "Booking".to_owned());
        let at = match &entry {
            Entry::Path(path) => path.span(),
            Entry::Lit(lit) => lit.span(),
        };
        ctxt.syn_error(syn::Error::new(
            at,
            format!("name a stage by its variant alone, unquoted: `to({example})`"),
        ));
    }
    named
}

/// An MCP toolset, by the name it was given: `crm` or `"crm-eu"`.
fn toolset_name(ctxt: &Ctxt, entry: Entry) -> Option<Named> {
    match entry {
        Entry::Lit(lit) if lit.value().trim().is_empty() => {
            ctxt.error_spanned_by(
                &lit,
                "an MCP toolset's name cannot be empty: write the name it was given",
            );
            None
        }
        Entry::Lit(lit) => Some(Named {
            text: lit.value(),
            span: lit.span(),
        }),
        Entry::Path(path) => {
            let named = plain(&path);
            if named.is_none() {
                ctxt.error_spanned_by(
                    &path,
                    "name an MCP toolset by the name it was given: `mcp(crm)` or \
                     `mcp(\"crm-eu\")`",
                );
            }
            named
        }
    }
}

/// Adds `names` to `into`; a name already there is an error (and is not added twice).
fn extend_once(
    ctxt: &Ctxt,
    into: &mut Vec<Named>,
    names: impl IntoIterator<Item = Named>,
    list: &str,
) {
    for named in names {
        if into.iter().any(|n| n.text == named.text) {
            ctxt.syn_error(syn::Error::new(
                named.span,
                format!("`{}` is named twice in `{list}`: remove one", named.text),
            ));
        } else {
            into.push(named);
        }
    }
}

/// The stage's instruction: its doc comment's lines joined with `\n`, each without the one space
/// `///` leaves, the whole trimmed. `Ok(None)` when there is none (or it is blank).
fn instruction(attrs: &[Attribute]) -> syn::Result<Option<String>> {
    let mut lines: Vec<String> = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident(DOC)) {
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => {
                for line in s.value().split('\n') {
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    lines.push(line.strip_prefix(' ').unwrap_or(line).to_owned());
                }
            }
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "write this stage's doc comment as text (`/// ...`): it is the stage's \
                     instruction, read at compile time",
                ));
            }
        }
    }
    let text = lines.join("\n").trim().to_owned();
    Ok((!text.is_empty()).then_some(text))
}
