//! The replay's stand-in provider: answers each model request with the recorded response whose
//! request it matches, and what matches none as the replay was told (refused, or forwarded).

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use serde_json::Value;

use super::path::same_path;
use super::report::{Answered, RequestMatch};
use crate::lock;
use voqalize::record::Exchange;

/// The longest model request body the stand-in reads: 64 MiB.
const MAX_REQUEST_BYTES: usize = 64 << 20;

/// What the server answers a request that matches no recorded one with.
#[derive(Debug, Clone, Default)]
pub(super) enum Fallback {
    /// A `400` the layer reads as a failed request (the turn fails as it would on a bad request).
    #[default]
    Refuse,
    /// The request is sent on to this base URL with its headers, and its answer streamed back.
    #[cfg(feature = "model")]
    Forward(String),
}

pub(super) struct Shared {
    exchanges: Vec<Exchange>,
    pub(super) fallback: Mutex<Fallback>,
    /// Which recorded exchanges this run answered with, and every request it was asked.
    run: Mutex<Run>,
}

#[derive(Default)]
struct Run {
    used: Vec<bool>,
    requests: Vec<RequestMatch>,
}

/// The server: its base URL, and the task serving it (aborted when dropped).
pub(super) struct Server {
    pub(super) base_url: String,
    pub(super) shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub(super) async fn start(exchanges: Vec<Exchange>) -> std::io::Result<Server> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            exchanges,
            fallback: Mutex::new(Fallback::default()),
            run: Mutex::new(Run::default()),
        });
        // A model request can be long (a long call's history): axum's 2 MB default would answer
        // it 413 before it is matched.
        let app = axum::Router::new()
            .fallback(answer)
            .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(shared.clone());
        let listener = listener.tap_io(|tcp| drop(tcp.set_nodelay(true)));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Server {
            base_url,
            shared,
            task,
        })
    }

    /// Forgets the last run: every recorded exchange can answer again.
    pub(super) fn reset(&self) {
        *lock(&self.shared.run) = Run {
            used: vec![false; self.shared.exchanges.len()],
            requests: Vec::new(),
        };
    }

    /// The requests of this run, in the order they came.
    pub(super) fn requests(&self) -> Vec<RequestMatch> {
        lock(&self.shared.run).requests.clone()
    }
}

/// Picks the recorded exchange for a request: the first unused one with the same path and body,
/// else the first used one (a retry, or the same question asked again).
fn pick(shared: &Shared, run: &mut Run, path: &str, body: &Value) -> Option<(usize, bool)> {
    let same = |e: &Exchange| same_path(path, &e.path) && e.request == *body;
    let unused = shared
        .exchanges
        .iter()
        .enumerate()
        .find(|(i, e)| !run.used.get(*i).copied().unwrap_or(true) && same(e));
    if let Some((i, _)) = unused {
        if let Some(used) = run.used.get_mut(i) {
            *used = true;
        }
        return Some((i, false));
    }
    shared.exchanges.iter().position(same).map(|i| (i, true))
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    #[cfg_attr(not(feature = "model"), allow(unused_variables))] headers: HeaderMap,
    body: Bytes,
) -> Response {
    // The layer's warm-up (`HEAD` on the base URL when a session starts) is not a model request.
    if method != Method::POST {
        return StatusCode::OK.into_response();
    }
    let path = uri.path().to_owned();
    // Read as the recording kept it, so a request matches its recorded body.
    let request: Value = voqalize::__kit::json_or_text(&body);
    let picked = {
        let mut run = lock(&shared.run);
        let picked = pick(&shared, &mut run, &path, &request);
        let answered = match picked {
            Some((index, again)) => Answered::Recorded { index, again },
            None => Answered::Unmatched {
                forwarded: !matches!(*lock(&shared.fallback), Fallback::Refuse),
            },
        };
        run.requests.push(RequestMatch {
            path: path.clone(),
            request: request.clone(),
            answered,
        });
        picked
    };
    if let Some((index, _)) = picked
        && let Some(exchange) = shared.exchanges.get(index)
    {
        return recorded(exchange);
    }
    let fallback = lock(&shared.fallback).clone();
    match fallback {
        Fallback::Refuse => (
            StatusCode::BAD_REQUEST,
            [("content-type", "application/json")],
            r#"{"error":{"message":"voqalize replay: no recorded model request matches this one, and the replay forwards none"}}"#,
        )
            .into_response(),
        #[cfg(feature = "model")]
        Fallback::Forward(base) => forward(&base, &uri, &headers, body).await,
    }
}

/// A recorded exchange as it was answered: its status and body (a request that got no answer is
/// a `502` naming why).
fn recorded(exchange: &Exchange) -> Response {
    let Some(status) = exchange.status.and_then(|s| StatusCode::from_u16(s).ok()) else {
        let why = exchange.error.as_deref().unwrap_or("no response");
        let body = serde_json::json!({"error": {"message": format!("recorded: {why}")}});
        return (
            StatusCode::BAD_GATEWAY,
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response();
    };
    let kind = if status.is_success() {
        "text/event-stream"
    } else {
        "application/json"
    };
    (status, [("content-type", kind)], exchange.response.clone()).into_response()
}

/// Sends the request on to `base` + its path and query, with its headers (the layer's own API
/// key included), and streams the answer back as it comes.
#[cfg(feature = "model")]
async fn forward(base: &str, uri: &Uri, headers: &HeaderMap, body: Bytes) -> Response {
    let target = format!(
        "{}{}",
        base.trim_end_matches('/'),
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let client = match voqalize::__kit::http_client(std::time::Duration::from_secs(10)) {
        Ok(client) => client,
        Err(e) => return bad_gateway(&*e),
    };
    let mut request = client.post(&target).body(body.to_vec());
    for (name, value) in headers {
        if name != "host"
            && name != "content-length"
            && let Ok(value) = value.to_str()
        {
            request = request.header(name.as_str(), value);
        }
    }
    let mut response = match request.send().await {
        Ok(response) => response,
        Err(e) => return bad_gateway(&e),
    };
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        loop {
            let item = match response.chunk().await {
                Ok(Some(bytes)) => Ok(bytes),
                Ok(None) => break,
                Err(e) => Err(std::io::Error::other(e)),
            };
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                break;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .status(status)
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[cfg(feature = "model")]
fn bad_gateway(e: &(dyn std::error::Error + 'static)) -> Response {
    let body = serde_json::json!({
        "error": {"message": format!("voqalize replay: forwarding failed: {}", voqalize::__kit::chain(e))}
    });
    (
        StatusCode::BAD_GATEWAY,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}
