//! A server's tool list made declarations: the allowlist, the filter, the prefix, each tool's
//! settings, and the bounds on what the server lists (how many tools, each schema's bytes and
//! depth, each description's bytes). What is left out is said in one warning per listing.

use std::sync::Arc;

use rmcp::model::PaginatedRequestParams;
use rmcp::service::RoleClient;
use serde_json::Value;

use super::Shared;
use super::call::Runner;
use super::connection::ListError;
use super::error::McpError;
use super::options::MCP_MAX_DESCRIPTION_BYTES;
use crate::logline::outside;
use crate::recover::lock;
use crate::tools::{Added, AddedDecl, ToolDecl, shortened_to};

/// The most pages of one listing read: a server that pages on forever is cut there.
const MAX_PAGES: usize = 32;
/// The deepest schema kept (objects and arrays nested).
const MAX_SCHEMA_DEPTH: usize = 32;

/// One listed tool, as far as the model is concerned.
struct Listed {
    name: String,
    description: String,
    schema: Value,
}

/// Lists the server's tools (every page, up to [`MAX_PAGES`]) and makes them declarations.
pub(super) async fn list(
    shared: &Arc<Shared>,
    peer: &rmcp::Peer<RoleClient>,
) -> Result<Arc<[Arc<ToolDecl>]>, ListError> {
    let mut listed = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|e| ListError::Failed {
                why: format!("tools/list failed: {}", outside(&e.to_string())),
                source: Some(Box::new(e)),
            })?;
        listed.extend(page.tools.into_iter().map(|t| Listed {
            name: t.name.into_owned(),
            description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
            schema: Value::Object((*t.input_schema).clone()),
        }));
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => break,
        }
    }
    Ok(declare(shared, listed))
}

/// What was left out of a listing, for its one warning.
#[derive(Default)]
struct LeftOut {
    reasons: Vec<String>,
    count: usize,
}

impl LeftOut {
    fn add(&mut self, name: &str, why: &str) {
        self.count += 1;
        if self.reasons.len() < 8 {
            self.reasons.push(format!("{} ({why})", outside(name)));
        }
    }
}

/// The listed tools the toolset keeps, as declarations.
fn declare(shared: &Arc<Shared>, listed: Vec<Listed>) -> Arc<[Arc<ToolDecl>]> {
    let settings = &shared.settings;
    let mut left = LeftOut::default();
    let mut kept: Vec<Arc<ToolDecl>> = Vec::new();
    let total = listed.len();
    for tool in listed {
        if let Some(allow) = &settings.allow
            && !allow.contains(&tool.name)
        {
            continue;
        }
        if let Some(keep) = &settings.filter
            && !keep(&tool.name, &tool.description)
        {
            continue;
        }
        let name = format!("{}{}", settings.prefix, tool.name);
        if let Some(why) = refused(shared, &tool, &name, &kept) {
            left.add(&tool.name, &why);
            continue;
        }
        if kept.len() == settings.max_tools {
            left.add(
                &tool.name,
                &format!("past max_tools={}", settings.max_tools),
            );
            continue;
        }
        kept.push(Arc::new(decl(shared, tool, name)));
    }
    if let Some(allow) = &settings.allow {
        for want in allow {
            let full = format!("{}{want}", settings.prefix);
            if !kept.iter().any(|d| d.name() == full)
                && !left.reasons.iter().any(|r| r.starts_with(want.as_str()))
            {
                left.add(want, "allowed, but the server does not list it");
            }
        }
    }
    if left.count > 0 && lock(&shared.log).listing.allow() {
        tracing::warn!(
            "MCP toolset {}: {} of its {total} listed tools left out: {}{}",
            shared.name,
            left.count,
            left.reasons.join("; "),
            if left.count > left.reasons.len() {
                "; ..."
            } else {
                ""
            }
        );
    }
    kept.into()
}

/// Why a listed tool cannot be declared, if it cannot.
fn refused(shared: &Shared, tool: &Listed, name: &str, kept: &[Arc<ToolDecl>]) -> Option<String> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !valid {
        return Some("its name is not one a model takes".into());
    }
    if kept.iter().any(|d| d.name() == name) {
        return Some("listed twice".into());
    }
    if tool.schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("its input schema is not an object".into());
    }
    let bytes = serde_json::to_vec(&tool.schema).map_or(usize::MAX, |b| b.len());
    if bytes > shared.settings.max_schema_bytes {
        return Some(format!(
            "its schema has {bytes} bytes, over max_schema_bytes={}",
            shared.settings.max_schema_bytes
        ));
    }
    if depth(&tool.schema, 0) > MAX_SCHEMA_DEPTH {
        return Some(format!("its schema nests deeper than {MAX_SCHEMA_DEPTH}"));
    }
    None
}

/// How deep a JSON value nests (stops counting past the bound).
fn depth(value: &Value, at: usize) -> usize {
    if at > MAX_SCHEMA_DEPTH {
        return at;
    }
    match value {
        Value::Object(m) => m.values().map(|v| depth(v, at + 1)).max().unwrap_or(at + 1),
        Value::Array(a) => a.iter().map(|v| depth(v, at + 1)).max().unwrap_or(at + 1),
        _ => at,
    }
}

/// One tool's declaration, with its settings over the toolset's.
fn decl(shared: &Arc<Shared>, tool: Listed, name: String) -> ToolDecl {
    let settings = &shared.settings;
    let own = settings.tools.get(&tool.name);
    let description = own
        .and_then(|o| o.description.clone())
        .unwrap_or(tool.description);
    ToolDecl::added(AddedDecl {
        name,
        description: shortened_to(&description, MCP_MAX_DESCRIPTION_BYTES),
        schema: tool.schema,
        needs_result_now: own
            .and_then(|o| o.needs_result_now)
            .unwrap_or(settings.needs_result_now),
        policy: own.and_then(|o| o.policy).unwrap_or(settings.policy),
        timeout: Some(own.and_then(|o| o.timeout).unwrap_or(settings.timeout)),
        filler: own
            .and_then(|o| o.filler.clone())
            .or_else(|| settings.filler.clone()),
        added: Added {
            source: shared.name.clone(),
            kind: "mcp",
            remote: tool.name.into(),
            runner: Arc::new(Runner {
                shared: Arc::downgrade(shared),
            }),
        },
    })
}

/// A tool of the set that is one of `beside`'s (the brain's own tools), named with both.
pub(super) fn clash_beside(shared: &Shared) -> Option<McpError> {
    let tools = lock(&shared.tools).clone();
    for table in &shared.settings.beside {
        for own in table.iter() {
            if let Some(theirs) = tools.iter().find(|t| t.name() == own.name()) {
                return Some(McpError::NameClash {
                    name: own.name().to_owned(),
                    first: own.method().to_owned(),
                    second: theirs.method().to_owned(),
                });
            }
        }
    }
    None
}
