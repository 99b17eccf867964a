//! Token verification on the direct leg (docs/protocol.md §5.1–5.2) with real
//! RS256 tokens signed by the test-only keys in `tests/fixtures/`.

use std::sync::OnceLock;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Map, Value, json};
use voqalize::host::Claims;
use voqalize::{HostError, HostOptions};

/// Test-only key pairs, generated once with `openssl genpkey -algorithm RSA -pkeyopt
/// rsa_keygen_bits:2048`. They sign nothing outside these tests.
const SIGNER_PRIV: &str = include_str!("fixtures/test_signer_priv.pem");
const SIGNER_PUB: &str = include_str!("fixtures/test_signer_pub.pem");
const SIGNER_PUB_PKCS1: &str = include_str!("fixtures/test_signer_pub_pkcs1.pem");
const OTHER_PRIV: &str = include_str!("fixtures/other_priv.pem");
const OTHER_PUB: &str = include_str!("fixtures/other_pub.pem");

const SID: &str = "2f1c7d4e-0b6a-4c43-9a51-5d3e8f0a7b21";

fn signer() -> &'static EncodingKey {
    static KEY: OnceLock<EncodingKey> = OnceLock::new();
    KEY.get_or_init(|| EncodingKey::from_rsa_pem(SIGNER_PRIV.as_bytes()).expect("signer key"))
}

fn other() -> &'static EncodingKey {
    static KEY: OnceLock<EncodingKey> = OnceLock::new();
    KEY.get_or_init(|| EncodingKey::from_rsa_pem(OTHER_PRIV.as_bytes()).expect("other key"))
}

fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("timestamp fits i64")
}

/// The claims Voqalize mints (docs/protocol.md §5.1), valid for 60 s.
fn claims() -> Map<String, Value> {
    let t = now();
    let Value::Object(m) = json!({
        "iss": "pygato",
        "aud": "brain",
        "sub": SID,
        "kind": "pygato",
        "agent_id": "agent-7",
        "tenant_id": "tenant-3",
        "iat": t,
        "exp": t + 60,
    }) else {
        unreachable!()
    };
    m
}

fn with(mut c: Map<String, Value>, key: &str, value: Value) -> Map<String, Value> {
    c.insert(key.to_owned(), value);
    c
}

fn without(mut c: Map<String, Value>, key: &str) -> Map<String, Value> {
    assert!(c.remove(key).is_some(), "{key} was not in the claims");
    c
}

fn sign_with(key: &EncodingKey, claims: &Map<String, Value>) -> String {
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), claims, key).expect("sign")
}

fn sign(claims: &Map<String, Value>) -> String {
    sign_with(signer(), claims)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Options trusting only the test signer.
fn trusting_signer() -> HostOptions {
    HostOptions::builder()
        .public_keys([SIGNER_PUB])
        .build()
        .expect("signer public key")
}

fn assert_accepted(options: &HostOptions, authorization: Option<&str>, sid: &str) -> Claims {
    match options.verify(authorization, sid) {
        Ok(c) => c,
        Err(e) => panic!("{authorization:?} for {sid} was rejected: {e}"),
    }
}

fn assert_rejected(options: &HostOptions, authorization: Option<&str>, sid: &str, why: &str) {
    match options.verify(authorization, sid) {
        Err(HostError::Rejected { session_id }) => assert_eq!(session_id, sid, "{why}"),
        other => panic!("{why}: expected Rejected, got {other:?}"),
    }
}

fn b64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Runs `f` and returns the captured log lines that name `session_id` (the capture is global to
/// the test process, so each case uses its own session id).
fn logs_of<T>(session_id: &str, f: impl FnOnce() -> T) -> (T, String) {
    let capture = crate::support::logs();
    let out = f();
    (out, capture.lines_with(session_id).join("\n"))
}

// ---------------------------------------------------------------------------------------------
// case 67: a valid token runs; everything else is rejected
// ---------------------------------------------------------------------------------------------

#[test]
fn case_67_valid_rs256_token_is_accepted_with_its_claims() {
    let options = trusting_signer();
    let token = sign(&claims());
    let got = assert_accepted(&options, Some(&bearer(&token)), SID);
    assert_eq!(got.0.get("sub"), Some(&json!(SID)));
    assert_eq!(got.0.get("kind"), Some(&json!("pygato")));
    assert_eq!(got.tenant_id().as_deref(), Some("tenant-3"));
    assert_eq!(got.agent_id().as_deref(), Some("agent-7"));
    // A bare JWT (no prefix) is accepted too, with the same claims.
    assert_eq!(assert_accepted(&options, Some(&token), SID), got);
}

#[test]
fn case_67_token_signed_by_an_untrusted_key_is_rejected() {
    let token = sign_with(other(), &claims());
    assert_rejected(&trusting_signer(), Some(&bearer(&token)), SID, "wrong key");
    // The default (production) options trust neither test key.
    assert_rejected(
        &HostOptions::production(),
        Some(&bearer(&sign(&claims()))),
        SID,
        "test key under production options",
    );
    assert_rejected(
        &HostOptions::default(),
        Some(&bearer(&sign(&claims()))),
        SID,
        "test key under default options",
    );
}

#[test]
fn case_67_hs256_and_none_are_rejected() {
    let options = trusting_signer();
    let hs = |secret: &[u8]| {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(),
            &EncodingKey::from_secret(secret).expect("hmac key"),
        )
        .expect("sign HS256")
    };
    assert_rejected(&options, Some(&bearer(&hs(b"shared secret"))), SID, "HS256");
    // Algorithm confusion: HMAC keyed with the trusted public key's PEM text.
    assert_rejected(
        &options,
        Some(&bearer(&hs(SIGNER_PUB.as_bytes()))),
        SID,
        "HS256 keyed with the public key",
    );
    // alg "none", unsigned.
    let payload = serde_json::to_vec(&claims()).expect("json");
    let none = format!(
        "{}.{}.",
        b64url(br#"{"alg":"none","typ":"JWT"}"#),
        b64url(&payload)
    );
    assert_rejected(&options, Some(&bearer(&none)), SID, "alg none");
    // An RS256 token whose signature was stripped.
    let good = sign(&claims());
    let stripped = &good[..=good.rfind('.').expect("three parts")];
    assert_rejected(&options, Some(&bearer(stripped)), SID, "no signature");
    // A tampered payload under a valid signature.
    let parts: Vec<&str> = good.split('.').collect();
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        b64url(&serde_json::to_vec(&with(claims(), "sub", json!("someone-else"))).expect("json")),
        parts[2]
    );
    assert_rejected(&options, Some(&bearer(&forged)), "someone-else", "tampered");
}

#[test]
fn case_67_f15_missing_required_claims_are_rejected() {
    let options = trusting_signer();
    for claim in ["exp", "iss", "aud"] {
        let token = sign(&without(claims(), claim));
        assert_rejected(
            &options,
            Some(&bearer(&token)),
            SID,
            &format!("missing {claim}"),
        );
        let token = sign(&with(claims(), claim, Value::Null));
        assert_rejected(
            &options,
            Some(&bearer(&token)),
            SID,
            &format!("null {claim}"),
        );
    }
    // F15: a correctly signed token carrying only sub and exp.
    let t = now();
    let Value::Object(bare) = json!({"sub": SID, "exp": t + 600}) else {
        unreachable!()
    };
    assert_rejected(
        &options,
        Some(&bearer(&sign(&bare))),
        SID,
        "F15 sub+exp only",
    );
}

#[test]
fn case_67_wrong_audience_or_issuer_is_rejected() {
    let options = trusting_signer();
    let cases = [
        ("aud other", with(claims(), "aud", json!("other"))),
        ("aud [x, y]", with(claims(), "aud", json!(["x", "y"]))),
        ("aud []", with(claims(), "aud", json!([]))),
        ("aud Brain", with(claims(), "aud", json!("Brain"))),
        ("iss other", with(claims(), "iss", json!("other"))),
        ("iss Pygato", with(claims(), "iss", json!("Pygato"))),
        ("iss number", with(claims(), "iss", json!(7))),
    ];
    for (why, c) in cases {
        assert_rejected(&options, Some(&bearer(&sign(&c))), SID, why);
    }
}

#[test]
fn case_67_subject_must_be_the_session_id() {
    let options = trusting_signer();
    let token = sign(&claims());
    assert_rejected(
        &options,
        Some(&bearer(&token)),
        "another-session",
        "sub != session id",
    );
    assert_rejected(&options, Some(&bearer(&token)), "", "empty session id");
    assert_rejected(
        &options,
        Some(&bearer(&token)),
        &SID.to_uppercase(),
        "sub compared exactly",
    );
    let missing = sign(&without(claims(), "sub"));
    assert_rejected(&options, Some(&bearer(&missing)), SID, "missing sub");
    let numeric = sign(&with(claims(), "sub", json!(12)));
    assert_rejected(&options, Some(&bearer(&numeric)), "12", "numeric sub");
}

#[test]
fn case_67_f15_expired_token_is_rejected_with_zero_leeway() {
    let options = trusting_signer();
    let t = now();
    let expired = sign(&with(
        with(claims(), "exp", json!(t - 30)),
        "iat",
        json!(t - 90),
    ));
    assert_rejected(&options, Some(&bearer(&expired)), SID, "expired 30 s ago");
    let just = sign(&with(claims(), "exp", json!(t - 1)));
    assert_rejected(
        &options,
        Some(&bearer(&just)),
        SID,
        "expired 1 s ago (no leeway)",
    );
    // "exp is in the future": an exp equal to now has expired (PyJWT: exp <= now is expired).
    let at_now = sign(&with(claims(), "exp", json!(now())));
    assert_rejected(&options, Some(&bearer(&at_now)), SID, "exp == now");
    let garbage = sign(&with(claims(), "exp", json!("tomorrow")));
    assert_rejected(&options, Some(&bearer(&garbage)), SID, "exp not a number");
    // Still valid a few seconds ahead.
    let soon = sign(&with(claims(), "exp", json!(now() + 5)));
    assert_accepted(&options, Some(&bearer(&soon)), SID);
}

#[test]
fn case_67_iat_or_nbf_in_the_future_is_rejected() {
    let options = trusting_signer();
    let t = now();
    for claim in ["iat", "nbf"] {
        for ahead in [60, 5] {
            let token = sign(&with(claims(), claim, json!(t + ahead)));
            assert_rejected(
                &options,
                Some(&bearer(&token)),
                SID,
                &format!("{claim} {ahead} s in the future"),
            );
        }
        // Not a number: rejected (PyJWT refuses a non-integer iat; nbf likewise).
        let token = sign(&with(claims(), claim, json!("yesterday")));
        assert_rejected(
            &options,
            Some(&bearer(&token)),
            SID,
            &format!("{claim} not a number"),
        );
        // Now or in the past is fine.
        let token = sign(&with(claims(), claim, json!(t - 1)));
        assert_accepted(&options, Some(&bearer(&token)), SID);
    }
}

#[test]
fn case_67_empty_or_missing_token_is_rejected() {
    let options = trusting_signer();
    for authorization in [
        None,
        Some(""),
        Some("Bearer "),
        Some("Bearer     "),
        Some("bearer"),
        Some("Bearer"),
        Some("Basic dXNlcjpwYXNz"),
        Some("not.a.jwt"),
        Some("Bearer not-a-jwt"),
    ] {
        assert_rejected(&options, authorization, SID, &format!("{authorization:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// case 68: prefixes, list audiences, optional iat
// ---------------------------------------------------------------------------------------------

#[test]
fn case_68_bearer_prefix_is_case_insensitive_and_the_rest_is_trimmed() {
    let options = trusting_signer();
    let token = sign(&claims());
    for authorization in [
        format!("Bearer {token}"),
        format!("bearer   {token}  "),
        format!("BEARER {token}"),
        format!("BeArEr {token}\t"),
    ] {
        let got = assert_accepted(&options, Some(&authorization), SID);
        assert_eq!(got.0.get("sub"), Some(&json!(SID)), "{authorization}");
    }
    // A bare token is not trimmed (docs/protocol.md §5.1).
    assert_rejected(
        &options,
        Some(&format!(" {token}")),
        SID,
        "bare token with a leading space",
    );
    // Only one prefix is stripped.
    assert_rejected(
        &options,
        Some(&format!("Bearer Bearer {token}")),
        SID,
        "double prefix",
    );
}

#[test]
fn case_68_audience_list_containing_brain_is_accepted() {
    let options = trusting_signer();
    let token = sign(&with(claims(), "aud", json!(["x", "brain"])));
    assert_accepted(&options, Some(&bearer(&token)), SID);
    let token = sign(&with(claims(), "aud", json!(["brain"])));
    assert_accepted(&options, Some(&bearer(&token)), SID);
}

#[test]
fn case_68_missing_iat_is_accepted() {
    let options = trusting_signer();
    let token = sign(&without(claims(), "iat"));
    let got = assert_accepted(&options, Some(&bearer(&token)), SID);
    assert!(!got.0.contains_key("iat"));
    assert_eq!(got.tenant_id().as_deref(), Some("tenant-3"));
}

// ---------------------------------------------------------------------------------------------
// case 69: key bundles
// ---------------------------------------------------------------------------------------------

#[test]
fn case_69_keys_are_tried_in_order() {
    let token = sign(&claims());
    // [wrong, right]
    let both = HostOptions::builder()
        .public_keys([OTHER_PUB, SIGNER_PUB])
        .build()
        .expect("keys");
    assert_accepted(&both, Some(&bearer(&token)), SID);
    // [right, wrong]
    let both = HostOptions::builder()
        .public_keys(vec![SIGNER_PUB.to_owned(), OTHER_PUB.to_owned()])
        .build()
        .expect("keys");
    assert_accepted(&both, Some(&bearer(&token)), SID);
    // Blank entries are skipped, not fatal.
    let padded = HostOptions::builder()
        .public_keys(["", OTHER_PUB, "  \n", SIGNER_PUB])
        .build()
        .expect("keys");
    assert_accepted(&padded, Some(&bearer(&token)), SID);
    // trust_public_key appends to the bundle.
    let added = HostOptions::builder()
        .public_keys([OTHER_PUB])
        .trust_public_key(SIGNER_PUB)
        .build()
        .expect("keys");
    assert_accepted(&added, Some(&bearer(&token)), SID);
    assert_accepted(&added, Some(&bearer(&sign_with(other(), &claims()))), SID);
    // Production plus the signer: the added key is trusted.
    let prod_plus = HostOptions::builder()
        .trust_public_key(SIGNER_PUB)
        .build()
        .expect("options");
    assert_accepted(&prod_plus, Some(&bearer(&token)), SID);
    // PKCS#1 public keys are read too.
    let pkcs1 = HostOptions::builder()
        .public_keys([SIGNER_PUB_PKCS1])
        .build()
        .expect("pkcs1 key");
    assert_accepted(&pkcs1, Some(&bearer(&token)), SID);
    // Neither key matches: rejected.
    let only_other = HostOptions::builder()
        .public_keys([OTHER_PUB])
        .build()
        .expect("keys");
    assert_rejected(
        &only_other,
        Some(&bearer(&token)),
        SID,
        "only the wrong key",
    );
}

#[test]
fn case_69_subject_mismatch_is_rejected_with_a_warning_by_the_first_validating_key() {
    let token = sign(&with(claims(), "sub", json!("someone-else")));
    let options = HostOptions::builder()
        .public_keys([SIGNER_PUB, SIGNER_PUB])
        .build()
        .expect("keys");
    const SID_A: &str = "conf-case69-mismatch";
    let (result, logs) = logs_of(SID_A, || options.verify(Some(&bearer(&token)), SID_A));
    assert!(
        matches!(&result, Err(HostError::Rejected { session_id }) if session_id == SID_A),
        "{result:?}"
    );
    assert_eq!(
        logs.matches(&format!("session: token sub != session id for {SID_A}"))
            .count(),
        1,
        "the first key that validates decides; logs:\n{logs}"
    );
    assert!(logs.contains("WARN"), "{logs}");
    // A signature failure is a different warning, and no sub warning.
    const SID_B: &str = "conf-case69-wrong-key";
    let (result, logs) = logs_of(SID_B, || {
        trusting_signer().verify(Some(&bearer(&sign_with(other(), &claims()))), SID_B)
    });
    assert!(result.is_err());
    assert!(!logs.contains("sub != session id"), "{logs}");
    assert!(logs.contains("did not verify"), "{logs}");
}

// ---------------------------------------------------------------------------------------------
// case 70: key configuration errors and allow_unverified
// ---------------------------------------------------------------------------------------------

#[test]
fn case_70_no_keys_is_refused_at_construction() {
    assert!(matches!(
        HostOptions::builder()
            .public_keys(Vec::<String>::new())
            .build(),
        Err(HostError::NoKeys)
    ));
    assert!(matches!(
        HostOptions::builder().public_keys([""]).build(),
        Err(HostError::NoKeys)
    ));
    assert!(matches!(
        HostOptions::builder().public_keys(["", " \n\t "]).build(),
        Err(HostError::NoKeys)
    ));
    assert!(matches!(
        HostOptions::builder().public_keys(["not a pem"]).build(),
        Err(HostError::BadKey(_))
    ));
    assert!(matches!(
        HostOptions::builder()
            .trust_public_key("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
            .build(),
        Err(HostError::BadKey(_))
    ));
    let text = HostError::NoKeys.to_string();
    assert!(text.contains("allow_unverified"), "{text}");
}

#[test]
fn case_70_allow_unverified_accepts_anything_with_empty_claims() {
    let options = HostOptions::allow_unverified();
    let got = options
        .verify(None, SID)
        .expect("unverified accepts a missing token");
    assert_eq!(got, Claims::default());
    assert!(got.0.is_empty());
    assert_eq!(got.tenant_id(), None);
    assert_eq!(got.agent_id(), None);
    // Whatever is presented, nothing is read from it: log identity never comes from an
    // unverified token.
    let forged = sign_with(other(), &claims_map_for("any"));
    let got = options
        .verify(Some(&bearer(&forged)), "whatever")
        .expect("unverified accepts any token");
    assert_eq!(got, Claims::default());
}

/// A bad key is no error mid-chain: the builder takes it, and `build()` says what is wrong, after
/// every other setting (reqwest's way).
#[test]
fn a_bad_key_is_an_error_from_build_not_mid_chain() {
    let builder = HostOptions::builder()
        .public_keys(["not a pem"])
        .max_sessions(3)
        .trust_public_key("neither");
    assert!(matches!(builder.build(), Err(HostError::BadKey(_))));
}

/// A key with `allow_unverified` is an error from `build()` naming the setting, whichever came
/// first (once, trusting a key after `allow_unverified` silently turned verification back on).
#[test]
fn keys_with_allow_unverified_are_an_error_from_build_naming_it() {
    for builder in [
        HostOptions::builder()
            .allow_unverified()
            .trust_public_key(SIGNER_PUB),
        HostOptions::builder()
            .public_keys([SIGNER_PUB])
            .allow_unverified(),
    ] {
        let e = builder
            .build()
            .expect_err("keys and allow_unverified clash");
        assert!(
            matches!(
                e,
                HostError::Conflict {
                    setting: "allow_unverified",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("allow_unverified: "), "{e}");
    }
}

fn claims_map_for(sid: &str) -> Map<String, Value> {
    with(claims(), "sub", json!(sid))
}

// ---------------------------------------------------------------------------------------------
// claims → log identity
// ---------------------------------------------------------------------------------------------

#[test]
fn tenant_and_agent_ids_are_read_from_the_verified_claims() {
    let options = trusting_signer();
    let c = assert_accepted(&options, Some(&bearer(&sign(&claims()))), SID);
    assert_eq!(
        (c.tenant_id(), c.agent_id()),
        (Some("tenant-3".into()), Some("agent-7".into()))
    );

    // Numbers are rendered as text; empty strings and nulls count as absent.
    let numeric = with(
        with(claims(), "tenant_id", json!(42)),
        "agent_id",
        json!(""),
    );
    let c = assert_accepted(&options, Some(&bearer(&sign(&numeric))), SID);
    assert_eq!((c.tenant_id(), c.agent_id()), (Some("42".into()), None));
    let absent = with(without(claims(), "tenant_id"), "agent_id", Value::Null);
    let c = assert_accepted(&options, Some(&bearer(&sign(&absent))), SID);
    assert_eq!((c.tenant_id(), c.agent_id()), (None, None));

    // Claims is a plain map, so a caller-built one behaves the same.
    let mut m = Map::new();
    m.insert("tenant_id".into(), json!("t"));
    assert_eq!(Claims(m).tenant_id().as_deref(), Some("t"));
}

#[test]
fn rejection_error_names_the_session() {
    let err = trusting_signer().verify(None, SID).unwrap_err();
    assert_eq!(err.to_string(), format!("unauthorized session {SID}"));
}
