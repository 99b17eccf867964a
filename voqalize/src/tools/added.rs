//! Tools declared at run time beside a brain's `#[tool]`s (an MCP server's), and the handle the
//! voice core keeps on any tool while its call runs.
//!
//! A `#[tool]` is a `&'static ToolDecl` of its brain's table, run by the brain's dispatcher. An
//! added tool is an `Arc<ToolDecl>` made when its server listed it, run by its [`AddedRunner`]:
//! a future that holds no brain, so its run is always a task of its own and can outlive its turn.

use std::borrow::Cow;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{ToolDecl, ToolError, ToolPolicy};

/// Who runs a tool.
pub(crate) enum Origin {
    /// The brain's dispatcher: `Toolbox::__run_tool(index, ..)`.
    Brain { index: usize },
    /// A runner outside the brain.
    Added(Added),
}

/// An added tool's runner, and where the tool comes from (what TurnSteps and spans name).
pub(crate) struct Added {
    /// The source's name: an MCP toolset's name.
    pub(crate) source: Arc<str>,
    /// The TurnStep kind of its runs (`mcp`).
    pub(crate) kind: &'static str,
    /// The tool's name at its source (without the toolset's prefix).
    pub(crate) remote: Arc<str>,
    pub(crate) runner: Arc<dyn AddedRunner>,
}

/// The future of one added tool's run: it holds no brain and no turn.
pub(crate) type AddedRun = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// What runs a tool declared outside the brain (an MCP toolset).
pub(crate) trait AddedRunner: Send + Sync + 'static {
    /// Runs the tool named `remote` at the source with `arguments` (a JSON object, already
    /// checked to be one). Progress lines go to the running call's lane (the task-local context
    /// the voice core sets around the run).
    fn run(&self, remote: Arc<str>, arguments: Value) -> AddedRun;
}

/// Everything an added tool's declaration says.
pub(crate) struct AddedDecl {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) schema: Value,
    pub(crate) needs_result_now: bool,
    pub(crate) policy: ToolPolicy,
    pub(crate) timeout: Option<Duration>,
    pub(crate) filler: Option<String>,
    pub(crate) added: Added,
}

impl ToolDecl {
    /// The declaration of a tool run outside the brain: `method` reads `kind:source/remote`.
    pub(crate) fn added(decl: AddedDecl) -> ToolDecl {
        let AddedDecl {
            name,
            description,
            schema,
            needs_result_now,
            policy,
            timeout,
            filler,
            added,
        } = decl;
        ToolDecl {
            name: Cow::Owned(name),
            description: Cow::Owned(description),
            needs_result_now,
            policy,
            timeout,
            filler: filler.map(Cow::Owned),
            method: Cow::Owned(format!("{}:{}/{}", added.kind, added.source, added.remote)),
            origin: Origin::Added(added),
            transition: None,
            has_arguments: true,
            schema,
            problem: None,
            rewritten: Default::default(),
            loss_warning: [
                std::sync::Once::new(),
                std::sync::Once::new(),
                std::sync::Once::new(),
            ],
            strict_warning: std::sync::Once::new(),
        }
    }

    /// An added tool's line in a call's recording (`None` for a `#[tool]`).
    #[cfg(feature = "mcp")]
    pub(crate) fn recorded(&self) -> crate::record::McpToolLine {
        let remote = self.added_origin().map_or("", |a| &a.remote);
        crate::record::McpToolLine {
            name: self.name.to_string(),
            tool: remote.to_owned(),
            description: self.description.to_string(),
            schema: self.schema.clone(),
            policy: self.policy.name().to_owned(),
            timeout_ms: self
                .timeout
                .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            needs_result_now: self.needs_result_now,
            filler: self.filler.as_ref().map(|f| f.to_string()),
        }
    }

    /// The runner of an added tool.
    pub(crate) fn added_origin(&self) -> Option<&Added> {
        match &self.origin {
            Origin::Brain { .. } => None,
            Origin::Added(added) => Some(added),
        }
    }
}

/// A tool as the voice core holds it while its call runs (the call can outlive its turn's set).
#[derive(Clone)]
pub(crate) enum DeclRef {
    /// A `#[tool]` of the brain's table.
    Brain(&'static ToolDecl),
    /// An added tool.
    Added(Arc<ToolDecl>),
}

impl Deref for DeclRef {
    type Target = ToolDecl;

    fn deref(&self) -> &ToolDecl {
        match self {
            DeclRef::Brain(decl) => decl,
            DeclRef::Added(decl) => decl,
        }
    }
}
