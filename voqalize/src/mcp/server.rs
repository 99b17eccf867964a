//! [`McpServer`]: how to reach an MCP server, a child process over stdio or an endpoint over
//! streamable HTTP.

use std::fmt;
use std::path::PathBuf;

use crate::model::HttpOptions;

/// How to reach one MCP server: [`McpServer::stdio`] (a program the SDK starts, supervises and
/// restarts) or [`McpServer::http`] (a streamable HTTP endpoint).
#[derive(Clone)]
pub struct McpServer {
    pub(crate) reach: Reach,
}

#[derive(Clone)]
pub(crate) enum Reach {
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        dir: Option<PathBuf>,
    },
    Http {
        url: String,
        bearer: Option<String>,
        http: HttpOptions,
    },
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reach {
            Reach::Stdio {
                program, args, env, ..
            } => f
                .debug_struct("McpServer::stdio")
                .field("program", program)
                .field("args", args)
                // Values can be secrets.
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish_non_exhaustive(),
            Reach::Http {
                url, bearer, http, ..
            } => f
                .debug_struct("McpServer::http")
                .field("url", url)
                .field("bearer", &bearer.as_ref().map(|_| "<set>"))
                .field("http", http)
                .finish(),
        }
    }
}

impl McpServer {
    /// A server the SDK runs as a child process, speaking MCP over its stdin and stdout:
    /// `program` (found on `PATH` unless it is a path) with no arguments yet. Its stderr is read
    /// and logged at debug level, clipped and summed up; the process is killed when its
    /// connection ends.
    pub fn stdio(program: impl Into<String>) -> McpServer {
        McpServer {
            reach: Reach::Stdio {
                program: program.into(),
                args: Vec::new(),
                env: Vec::new(),
                dir: None,
            },
        }
    }

    /// A server at a streamable HTTP endpoint (`https://host/mcp`), reached through the same
    /// HTTP client as the model layers (HTTP/1.1, rustls, the platform's roots).
    pub fn http(url: impl Into<String>) -> McpServer {
        McpServer {
            reach: Reach::Http {
                url: url.into(),
                bearer: None,
                http: HttpOptions::new(),
            },
        }
    }

    /// Adds one argument to a stdio server's command line (ignored for an HTTP server).
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> McpServer {
        if let Reach::Stdio { args, .. } = &mut self.reach {
            args.push(arg.into());
        }
        self
    }

    /// Adds arguments to a stdio server's command line (ignored for an HTTP server).
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, more: I) -> McpServer {
        if let Reach::Stdio { args, .. } = &mut self.reach {
            args.extend(more.into_iter().map(Into::into));
        }
        self
    }

    /// Sets an environment variable of a stdio server's process, on top of this process's
    /// environment (ignored for an HTTP server).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> McpServer {
        if let Reach::Stdio { env, .. } = &mut self.reach {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// The working directory of a stdio server's process (ignored for an HTTP server).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> McpServer {
        if let Reach::Stdio { dir: d, .. } = &mut self.reach {
            *d = Some(dir.into());
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request to an HTTP server (ignored for
    /// a stdio server).
    #[must_use]
    pub fn bearer(mut self, token: impl Into<String>) -> McpServer {
        if let Reach::Http { bearer, .. } = &mut self.reach {
            *bearer = Some(token.into());
        }
        self
    }

    /// Sends a header with every request to an HTTP server (ignored for a stdio server).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> McpServer {
        if let Reach::Http { http, .. } = &mut self.reach {
            *http = std::mem::take(http).header(name, value);
        }
        self
    }

    /// An HTTP server's proxy, extra root certificates and headers, as the model layers take
    /// them (ignored for a stdio server). Replaces headers set with [`header`](Self::header).
    #[must_use]
    pub fn http_options(mut self, options: HttpOptions) -> McpServer {
        if let Reach::Http { http, .. } = &mut self.reach {
            *http = options;
        }
        self
    }

    /// What logs say of the server: the program or the URL (without its query).
    pub(crate) fn describe(&self) -> String {
        match &self.reach {
            Reach::Stdio { program, .. } => program.clone(),
            Reach::Http { url, .. } => url.split('?').next().unwrap_or(url).to_owned(),
        }
    }
}
