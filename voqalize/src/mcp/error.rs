//! [`McpError`]: why an MCP toolset could not be made or connected.

/// A boxed error from the MCP client underneath, kept as a source without naming its type.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an MCP toolset could not be made or connected. Every variant names the toolset; a
/// server's own text in a message is clipped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The toolset's settings cannot work (an empty name, a URL that does not parse, a header
    /// that is not valid HTTP, a prefix that makes names a model refuses).
    #[error("MCP toolset '{toolset}': {what}")]
    Config {
        /// The toolset's name.
        toolset: String,
        /// What is wrong.
        what: String,
    },
    /// The stdio server's program could not be started.
    #[error("MCP toolset '{toolset}': could not start `{program}`")]
    Spawn {
        /// The toolset's name.
        toolset: String,
        /// The program, as given.
        program: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The server did not complete the MCP handshake (`initialize`) or its first `tools/list`
    /// within the connect timeout, or answered it with an error; the last try's cause is kept.
    #[error("MCP toolset '{toolset}': the server did not connect (tries: {tries}): {why}")]
    Connect {
        /// The toolset's name.
        toolset: String,
        /// How many times it was tried (more than one with `retry_at_start`).
        tries: u32,
        /// What went wrong the last time, clipped.
        why: String,
        /// The client's error, when there was one.
        #[source]
        source: Option<Cause>,
    },
    /// Two tools would reach the model under one name: two toolsets', or a toolset's and a
    /// `#[tool]`'s of the brain (given with `beside`).
    #[error(
        "the tool name '{name}' is declared twice: by {first} and by {second} (give the toolsets different prefixes, or leave one of the tools out)"
    )]
    NameClash {
        /// The name the model would read.
        name: String,
        /// One tool, as `Type::method` or `mcp:toolset/tool`.
        first: String,
        /// The other.
        second: String,
    },
}
