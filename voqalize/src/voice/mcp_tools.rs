//! A `Model`'s MCP toolsets (feature `mcp`): lent to it, added to each turn's tools, and their
//! lists written to the call's recording.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Model;
use crate::recover::lock;
use crate::tools::ToolSet;

impl Model {
    /// Lends the model an MCP toolset's tools (feature `mcp`), beside the brain's own: each turn
    /// declares the toolset's tools as its listing stands when the turn starts. For a toolset
    /// connected once per process, in the brain factory: `Model::new(layer).mcp(crm.clone())?`.
    /// For a connection per call, connect in `on_session_start` and use
    /// [`add_mcp`](Self::add_mcp) (see [`mcp`](crate::mcp)).
    ///
    /// # Errors
    /// [`McpError::NameClash`](crate::mcp::McpError::NameClash) when one of its tools has the
    /// name of a tool of a toolset given before, naming both. A clash that appears later (a
    /// server's list changed) or with a `#[tool]` of the brain leaves the MCP tool out of the
    /// turn, with one error log naming both (the brain's own tool, or the first toolset's,
    /// wins); `McpToolsetBuilder::beside` makes the latter a connect error too.
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub fn mcp(self, toolset: crate::mcp::McpToolset) -> Result<Model, crate::mcp::McpError> {
        self.add_mcp(toolset)?;
        Ok(self)
    }

    /// Lends the model an MCP toolset's tools from now on, from the next turn: as
    /// [`mcp`](Self::mcp), on a `Model` already made (a toolset connected for this call in
    /// `on_session_start`; it closes when the `Model` is dropped at the call's end, unless a
    /// clone of it lives on).
    ///
    /// # Errors
    /// As [`mcp`](Self::mcp), and [`McpError::Config`](crate::mcp::McpError::Config) for a
    /// toolset (or a clone of it) lent to this `Model` already; the toolset is then not added.
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub fn add_mcp(&self, toolset: crate::mcp::McpToolset) -> Result<(), crate::mcp::McpError> {
        if let Some(m) = lock(&self.inner.workflow).as_ref() {
            let stages = m.setup().table.stages();
            if !stages.iter().any(|s| s.mcp().contains(&toolset.name())) {
                return Err(crate::mcp::McpError::Config {
                    toolset: toolset.name().to_owned(),
                    what: format!(
                        "no stage of `{}` names it in `mcp(..)`, so its tools would never be \
                         declared: add `mcp({})` to the `#[stage(..)]` of the stages that use it",
                        m.type_name(),
                        toolset.name()
                    ),
                });
            }
        }
        let theirs = toolset.tools();
        let mut lent = lock(&self.inner.mcp);
        for earlier in lent.iter() {
            if earlier.same(&toolset) {
                return Err(crate::mcp::McpError::Config {
                    toolset: toolset.name().to_owned(),
                    what: "it is lent to this Model already".into(),
                });
            }
            for tool in earlier.tools().iter() {
                if let Some(clash) = theirs.iter().find(|t| t.name() == tool.name()) {
                    return Err(crate::mcp::McpError::NameClash {
                        name: tool.name().to_owned(),
                        first: tool.method().to_owned(),
                        second: clash.method().to_owned(),
                    });
                }
            }
        }
        lent.push(toolset);
        Ok(())
    }

    /// Checks, once per `Model`, what only run time can see of its stages and its toolsets: a
    /// toolset no stage names (its tools are never declared) and a stage naming a toolset the
    /// `Model` was not lent; each is one error log.
    pub(crate) fn check_stage_mcp(&self, stages: &[crate::stages::StageDecl], type_name: &str) {
        if self.inner.checked_mcp.swap(true, Ordering::Relaxed) {
            return;
        }
        let lent = lock(&self.inner.mcp).clone();
        for toolset in &lent {
            if !stages.iter().any(|s| s.mcp().contains(&toolset.name())) {
                tracing::error!(
                    "the MCP toolset {} is in no stage of `{type_name}`: its tools are never declared (add `mcp({})` to the stages that use it)",
                    toolset.name(),
                    toolset.name()
                );
            }
        }
        for stage in stages {
            for name in stage.mcp() {
                if !lent.iter().any(|t| t.name() == *name) {
                    tracing::error!(
                        "stage {} of `{type_name}` names the MCP toolset {name}, which this Model was not lent (`Model::mcp`, `Model::add_mcp`)",
                        stage.name()
                    );
                }
            }
        }
    }

    /// Adds the MCP toolsets' tools to a turn's set; a tool whose name is taken is left out,
    /// and said once.
    pub(super) fn add_mcp_tools(
        &self,
        tools: &mut ToolSet,
        tape: Option<&Arc<crate::record::Tape>>,
    ) {
        let lent = lock(&self.inner.mcp).clone();
        for (i, toolset) in lent.iter().enumerate() {
            if !self.stage_takes_mcp(toolset.name()) {
                continue;
            }
            let listed = toolset.tools();
            if let Some(tape) = tape {
                self.tape_mcp_tools(tape, i, toolset.name(), &listed);
            }
            let clashes = tools.add(&listed);
            if let Some((theirs, held)) = clashes.first()
                && !self.inner.warned_clash.swap(true, Ordering::Relaxed)
            {
                tracing::error!(
                    "the MCP tool {theirs} is left out of this call's turns: its name is that of {held} ({} clashes)",
                    clashes.len()
                );
            }
        }
    }

    /// Writes toolset `i`'s tools to the call's recording, unless the list is the one written
    /// last.
    fn tape_mcp_tools(
        &self,
        tape: &crate::record::Tape,
        i: usize,
        name: &str,
        listed: &Arc<[Arc<crate::tools::ToolDecl>]>,
    ) {
        let mut taped = lock(&self.inner.taped_mcp);
        if taped.len() <= i {
            taped.resize_with(i + 1, || Arc::downgrade(&Arc::<[_]>::from(Vec::new())));
        }
        if taped[i]
            .upgrade()
            .is_some_and(|last| Arc::ptr_eq(&last, listed))
        {
            return;
        }
        taped[i] = Arc::downgrade(listed);
        tape.mcp_tools(name, listed.iter().map(|t| t.recorded()).collect());
    }
}
