//! A server's tool list made declarations: the allowlist, the filter, the prefix, each tool's
//! settings, and the bounds on what the server lists (how many tools, each schema's bytes and
//! depth, each description's bytes). What is left out is said in one warning per listing.

use std::sync::Arc;

use rmcp::model::{ClientRequest, ListToolsRequest, PaginatedRequestParams, ServerResult};
use rmcp::service::{RoleClient, ServiceError};
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

/// Lists the server's tools and makes them declarations, page by page: only one page (at most
/// `max_message_bytes`) and the declarations kept are held at once, and no page is asked for
/// once `max_tools` are kept (nor past [`MAX_PAGES`]). The request bypasses rmcp's response
/// cache: the gate takes `tools/list_changed`, so a server's `ttlMs` would keep a stale list
/// (and a copy of it) there.
pub(super) async fn list(
    shared: &Arc<Shared>,
    peer: &rmcp::Peer<RoleClient>,
) -> Result<Arc<[Arc<ToolDecl>]>, ListError> {
    let mut keeping = Keeping::default();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let request = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params,
            extensions: Default::default(),
        });
        let failed = |e: ServiceError| ListError::Failed {
            why: format!("tools/list failed: {}", outside(&e.to_string())),
            source: Some(Box::new(e)),
        };
        let ServerResult::ListToolsResult(page) =
            peer.send_request(request).await.map_err(failed)?
        else {
            return Err(failed(ServiceError::UnexpectedResponse));
        };
        for t in page.tools {
            keeping.take(
                shared,
                Listed {
                    name: t.name.into_owned(),
                    description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                    schema: Value::Object(Arc::unwrap_or_clone(t.input_schema)),
                },
            );
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() && keeping.kept.len() < shared.settings.max_tools => {
                cursor = Some(next);
            }
            Some(next) if !next.is_empty() => {
                keeping.left.unread = true;
                break;
            }
            _ => break,
        }
    }
    Ok(keeping.done(shared))
}

/// What was left out of a listing, for its one warning.
#[derive(Default)]
struct LeftOut {
    reasons: Vec<String>,
    count: usize,
    /// The listing had more pages, not read once `max_tools` were kept.
    unread: bool,
}

impl LeftOut {
    fn add(&mut self, name: &str, why: &str) {
        self.count += 1;
        if self.reasons.len() < 8 {
            self.reasons.push(format!("{} ({why})", outside(name)));
        }
    }
}

/// The declarations a listing keeps so far, and what it left out.
#[derive(Default)]
struct Keeping {
    kept: Vec<Arc<ToolDecl>>,
    left: LeftOut,
    total: usize,
    /// The allowed names the server listed.
    allowed_seen: Vec<String>,
    /// The first names the server listed (clipped), for a message about a name it did not.
    sample: Vec<String>,
}

/// How many listed names a message about an unlisted allowed name quotes.
const SAMPLE: usize = 16;

impl Keeping {
    /// Keeps one listed tool as a declaration, or says why not.
    fn take(&mut self, shared: &Arc<Shared>, tool: Listed) {
        let settings = &shared.settings;
        self.total += 1;
        if self.sample.len() < SAMPLE {
            self.sample.push(outside(&tool.name).to_string());
        }
        if let Some(allow) = &settings.allow {
            if !allow.contains(&tool.name) {
                return;
            }
            self.allowed_seen.push(tool.name.clone());
        }
        if let Some(keep) = &settings.filter
            && !keep(&tool.name, &tool.description)
        {
            return;
        }
        let name = format!("{}{}", settings.prefix, tool.name);
        if let Some(why) = refused(shared, &tool, &name, &self.kept) {
            self.left.add(&tool.name, &why);
            return;
        }
        if self.kept.len() == settings.max_tools {
            self.left.add(
                &tool.name,
                &format!("past max_tools={}", settings.max_tools),
            );
            return;
        }
        self.kept.push(Arc::new(decl(shared, tool, name)));
    }

    /// The declarations kept, once the listing is read; what was left out said in one warning.
    fn done(self, shared: &Arc<Shared>) -> Arc<[Arc<ToolDecl>]> {
        let Keeping {
            kept,
            mut left,
            total,
            allowed_seen,
            sample,
        } = self;
        let unlisted: Vec<&String> = shared
            .settings
            .allow
            .iter()
            .flatten()
            .filter(|want| !allowed_seen.contains(want))
            .collect();
        *lock(&shared.unlisted) = (!unlisted.is_empty() && !left.unread).then(|| {
            let names: Vec<String> = unlisted
                .iter()
                .map(|n| format!("'{}'", outside(n)))
                .collect();
            format!(
                "allowed, but the server does not list {} (it lists {}: {}{})",
                names.join(", "),
                logline_count(total),
                sample.join(", "),
                if total > sample.len() { ", ..." } else { "" }
            )
        });
        warn_left_out(shared, &kept, &mut left, total);
        kept.into()
    }
}

/// `1 tool`, `5 tools`.
fn logline_count(n: usize) -> String {
    crate::logline::count(n, "tool").to_string()
}

/// Says in one warning which tools a listing left out, and why.
fn warn_left_out(shared: &Shared, kept: &[Arc<ToolDecl>], left: &mut LeftOut, total: usize) {
    let settings = &shared.settings;
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
    if (left.count > 0 || left.unread) && lock(&shared.log).listing.allow() {
        tracing::warn!(
            "MCP toolset {}: {} of its {total} listed tools left out: {}{}{}",
            shared.name,
            left.count,
            left.reasons.join("; "),
            if left.count > left.reasons.len() {
                "; ..."
            } else {
                ""
            },
            if left.unread {
                "; its next pages not read (max_tools are kept)"
            } else {
                ""
            }
        );
    }
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
        added: added(shared, &tool.name),
    })
}

/// Where a tool of the toolset comes from, and what runs it: `remote`, the tool's name at the
/// server, called through the toolset's connection (or its recording).
pub(super) fn added(shared: &Arc<Shared>, remote: &str) -> Added {
    Added {
        source: shared.name.clone(),
        kind: "mcp",
        remote: remote.into(),
        runner: Arc::new(Runner {
            shared: Arc::downgrade(shared),
        }),
    }
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
