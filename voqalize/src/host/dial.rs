//! The other end of the direct leg: dial a brain as Voqalize does (`?session_id=` on the URL, the
//! token as `Authorization: Bearer`). What the testing driver and the console share.

use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Why a brain could not be dialled: what failed, with its source.
pub(crate) type DialError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Dials `url` (`ws://host:port[/path][?query]`, plain TCP: brains under test and on a developer's
/// machine) with `session_id` set in the query (replacing one already there) and `token` sent as a
/// bearer token when given. `config` bounds what the brain may send back.
pub(crate) async fn dial(
    url: &str,
    session_id: &str,
    token: Option<&str>,
    config: Option<WebSocketConfig>,
) -> Result<WebSocketStream<TcpStream>, DialError> {
    let uri: Uri = url.parse()?;
    if uri.scheme_str().is_some_and(|s| s != "ws") {
        return Err(format!("only ws:// URLs can be dialled here, not {url}").into());
    }
    let host = uri.host().ok_or("the URL has no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let mut query: Vec<(String, String)> = uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    query.retain(|(k, _)| k != "session_id");
    query.push(("session_id".to_owned(), session_id.to_owned()));
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    let mut request = format!("ws://{host}:{port}{}?{query}", uri.path()).into_client_request()?;
    if let Some(token) = token {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))?;
        request.headers_mut().insert("authorization", value);
    }
    // `[::1]` in a URL is `::1` to connect to.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let stream = TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, config).await?;
    Ok(ws)
}
