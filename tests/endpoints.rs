//! Enterprise endpoints end to end, over real sockets: Gemini on Vertex AI with a bearer token
//! asked for per request, Azure OpenAI (Responses and chat) with its `api-key` header and its
//! URLs, and `HttpOptions`: a proxy every request goes through, extra root certificates a TLS
//! stand-in is trusted by (and refused without), extra headers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use voqalize::model::{Chat, Gemini, HttpOptions, OpenAi, Timeouts};
use voqalize::prelude::*;
use voqalize::voice::ModelLayer;
use voqalize_testing::{ModelServer, Provider, Reply, Voqalize};

use crate::support::driver;

/// A brain with no tools: the model answers every turn; failed turns say the fallback line.
struct Plain {
    model: Model,
}

impl Brain for Plain {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl Plain {}

const FALLBACK: &str = "One moment, please.";

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        gap: Duration::from_secs(5),
    }
}

async fn session(layer: ModelLayer) -> Voqalize {
    let mut v = driver(move || Plain {
        model: Model::new(layer.clone()).fallback_line(FALLBACK),
    })
    .await;
    v.start_silent().await.expect("a session");
    v
}

#[tokio::test]
async fn vertex_asks_for_a_fresh_token_on_every_request_and_names_project_and_location() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let layer: ModelLayer = Gemini::vertex("voice-prod", "europe-west4")
        .base_url(server.base_url())
        .model("gemini-3.5-flash")
        .timeouts(timeouts())
        .bearer(move || format!("ya29.token-{}", a.fetch_add(1, Ordering::SeqCst) + 1))
        .build()
        .expect("a valid layer")
        .into();
    let mut v = session(layer).await;
    for _ in 0..2 {
        server.reply(Reply::new().text("Hi.").finish());
        assert_eq!(v.user_says("hi").await.unwrap().text(), "Hi.");
    }
    let requests = server.requests();
    assert_eq!(
        requests[0].target,
        "/v1/projects/voice-prod/locations/europe-west4/publishers/google/models/gemini-3.5-flash:streamGenerateContent?alt=sse"
    );
    let tokens: Vec<_> = requests.iter().map(|r| r.header("authorization")).collect();
    assert_eq!(
        tokens,
        [Some("Bearer ya29.token-1"), Some("Bearer ya29.token-2")],
        "a rotated token is read before each request"
    );
    assert!(requests[0].header("x-goog-api-key").is_none());
}

#[tokio::test]
async fn a_token_a_header_cannot_carry_fails_that_turn_and_is_never_sent() {
    let server = ModelServer::start(Provider::Gemini).await.unwrap();
    let layer: ModelLayer = Gemini::vertex("voice-prod", "global")
        .base_url(server.base_url())
        .timeouts(timeouts())
        .bearer(|| "two\nlines".to_owned())
        .build()
        .expect("a valid layer")
        .into();
    let mut v = session(layer).await;
    assert_eq!(v.user_says("hi").await.unwrap().text(), FALLBACK);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn azure_responses_and_chat_use_its_urls_and_its_api_key_header() {
    let server = ModelServer::start(Provider::OpenAi).await.unwrap();
    let endpoint = server.base_url().trim_end_matches("/v1").to_owned();
    let layer: ModelLayer = OpenAi::azure(&endpoint, "voice-gpt")
        .api_key("azure-key")
        .timeouts(timeouts())
        .build()
        .expect("a valid layer")
        .into();
    let mut v = session(layer).await;
    server.reply(Reply::new().text("Hello.").finish().usage(3, 2));
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Hello.");
    let request = &server.requests()[0];
    assert_eq!(request.target, "/openai/v1/responses");
    assert_eq!(request.header("api-key"), Some("azure-key"));
    assert!(request.header("authorization").is_none());
    assert_eq!(request.body["model"], "voice-gpt");
    assert!(
        v.turn_steps()
            .iter()
            .any(|s| s.kind == "model" && s.provider == "microsoft"),
        "{:?}",
        v.turn_steps()
    );

    let server = ModelServer::start(Provider::Chat).await.unwrap();
    let endpoint = server.base_url().trim_end_matches("/v1").to_owned();
    let layer: ModelLayer = Chat::azure(&endpoint, "voice-4o")
        .api_key("azure-key")
        .api_version("2024-10-21")
        .timeouts(timeouts())
        .build()
        .expect("a valid layer")
        .into();
    let mut v = session(layer).await;
    server.reply(Reply::new().text("Hello.").finish());
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Hello.");
    let request = &server.requests()[0];
    assert_eq!(
        request.target,
        "/openai/deployments/voice-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(request.header("api-key"), Some("azure-key"));
}

#[tokio::test]
async fn every_request_goes_through_the_proxy_with_the_extra_headers() {
    // The stand-in plays the proxy: a request for an absolute URL reaches it.
    let proxy = ModelServer::start(Provider::Gemini).await.unwrap();
    let layer: ModelLayer = Gemini::builder("test-key")
        .base_url("http://gemini.example.invalid")
        .timeouts(timeouts())
        .http(
            HttpOptions::new()
                .proxy(proxy.base_url())
                .header("x-tenant", "voice"),
        )
        .build()
        .expect("a valid layer")
        .into();
    let mut v = session(layer).await;
    proxy.reply(Reply::new().text("Via the proxy.").finish());
    assert_eq!(v.user_says("hi").await.unwrap().text(), "Via the proxy.");
    let request = &proxy.requests()[0];
    assert_eq!(request.header("host"), Some("gemini.example.invalid"));
    assert_eq!(request.header("x-tenant"), Some("voice"));
    assert_eq!(request.header("x-goog-api-key"), Some("test-key"));
}

/// A TLS stand-in on 127.0.0.1 whose certificate is signed by `tests/fixtures/tls/ca.pem`:
/// every `POST` gets one Gemini reply, "Over TLS.", and the connection closes.
async fn tls_stand_in() -> String {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tls");
    let certs = CertificateDer::pem_file_iter(format!("{dir}/leaf.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(format!("{dir}/leaf.key")).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return; // a client that did not trust us
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && tls.read(&mut byte).await.unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; length];
                let _ = tls.read_exact(&mut body).await;
                let reply = if head.starts_with("post") {
                    let text = json!({"candidates": [{"content": {"parts": [{"text": "Over TLS."}],
                        "role": "model"}, "index": 0}]});
                    let end = json!({"candidates": [{"finishReason": "STOP", "index": 0}]});
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                         data: {text}\r\n\r\ndata: {end}\r\n\r\n"
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .into()
                };
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    format!("https://127.0.0.1:{}", addr.port())
}

#[tokio::test]
async fn extra_root_certificates_let_a_private_tls_endpoint_in_and_nothing_else_does() {
    let base = tls_stand_in().await;
    let ca = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tls/ca.pem"
    ))
    .unwrap();
    let layer = |http: HttpOptions| -> ModelLayer {
        Gemini::builder("test-key")
            .base_url(&base)
            .timeouts(timeouts())
            .http(http)
            .build()
            .expect("a valid layer")
            .into()
    };
    let mut trusted = session(layer(HttpOptions::new().root_certificates_pem(&ca))).await;
    assert_eq!(trusted.user_says("hi").await.unwrap().text(), "Over TLS.");
    let mut untrusted = session(layer(HttpOptions::new())).await;
    assert_eq!(
        untrusted.user_says("hi").await.unwrap().text(),
        FALLBACK,
        "the platform's roots alone do not trust the private CA"
    );
}

#[test]
fn http_options_are_checked_when_the_layer_is_built() {
    let build = |http: HttpOptions| Gemini::builder("k").http(http).build().map(|_| ());
    for (http, what) in [
        (HttpOptions::new().proxy("proxy.internal:3128"), "proxy"),
        (
            HttpOptions::new().root_certificates_pem("not a certificate"),
            "root certificates",
        ),
        (HttpOptions::new().header("bad header", "v"), "header"),
        (HttpOptions::new().header("x-ok", "two\nlines"), "header"),
    ] {
        let err = build(http).unwrap_err().to_string();
        assert!(err.contains(what), "{err}");
    }
    let with_credentials = HttpOptions::new().proxy("http://user:s3cret@proxy.internal:3128");
    assert!(
        Gemini::builder("k")
            .http(with_credentials.clone())
            .build()
            .is_ok()
    );
    let shown = format!("{with_credentials:?}");
    assert!(
        !shown.contains("s3cret") && shown.contains("proxy.internal"),
        "{shown}"
    );
    assert!(
        OpenAi::builder("k", "m")
            .api_version("2025-04-01-preview")
            .build()
            .is_err()
    );
    assert!(
        Chat::builder("http://127.0.0.1:9", "m")
            .api_version("2024-10-21")
            .build()
            .is_err()
    );
    assert!(
        OpenAi::azure("https://r.openai.azure.com", "d")
            .build()
            .is_err(),
        "no key"
    );
    assert!(
        Gemini::vertex("p", "us-central1").build().is_err(),
        "no token source"
    );
}
