//! What ACL costs a send on the fast path: reading a Java 4.9.8 SEND_MESSAGE_V2 header
//! (ACL off) against reading it and checking its signature over the header's entries and a
//! 1 KiB body (ACL on), the entries gathered in the header's one pass
//! (`Header::parse_signed` + `AclRules::allows_fields`) or read a second time
//! (`AclRules::allows` on the header text); and the floor under any ACL check of this send,
//! the HMAC-SHA1 of the fields and the body (and the SHA-1 of the body alone).
//!
//! `cargo bench -p rmq-net --bench acl`

use std::collections::HashMap;

use base64::Engine;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hmac::{Hmac, KeyInit, Mac};
use rmq_net::header::Header;
use rmq_net::{AclAccount, AclRules};
use sha1::Sha1;

const SECRET: &str = "bench-app-secret";
const TOPIC: &str = "AclBench";

/// The Java client's header entries for one send, without the signature.
fn entries() -> Vec<(&'static str, String)> {
    vec![
        ("AccessKey", "bench-app".into()),
        ("a", "bench_pg".into()),
        ("b", TOPIC.into()),
        ("c", "TBW102".into()),
        ("d", "4".into()),
        ("e", "3".into()),
        ("f", "0".into()),
        ("g", "1795548446992".into()),
        ("h", "0".into()),
        (
            "i",
            "UNIQ_KEY\u{1}7F00000100002A9F0000000000000001\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA"
                .into(),
        ),
        ("j", "0".into()),
        ("k", "false".into()),
        ("m", "false".into()),
        ("n", "broker-a".into()),
    ]
}

/// The frame header's JSON text, signed as the Java client's AclClientRPCHook signs it (the
/// entries' values in key order, then the body, HmacSHA1 under the secret key, Base64).
fn signed_header(body: &[u8]) -> String {
    let mut fields = entries();
    fields.sort();
    let mut mac = Hmac::<Sha1>::new_from_slice(SECRET.as_bytes()).unwrap();
    for (_, v) in &fields {
        mac.update(v.as_bytes());
    }
    mac.update(body);
    let signature = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    fields.push(("Signature", signature));
    let ext: serde_json::Map<String, serde_json::Value> = fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    serde_json::json!({"code": 310, "extFields": ext, "flag": 0, "language": "JAVA",
        "opaque": 7, "serializeTypeCurrentRPC": "JSON", "version": 401})
    .to_string()
}

fn bench(c: &mut Criterion) {
    let body = vec![b'x'; 1024];
    let text = signed_header(&body);
    let rules = AclRules::new([(
        "bench-app".to_string(),
        AclAccount::new(SECRET, false, HashMap::from([(TOPIC.to_string(), true)])),
    )]);
    assert!(
        rules.allows(310, &text, &body, TOPIC),
        "the bench's header is signed right"
    );
    let mut g = c.benchmark_group("acl_send_1KiB");
    g.bench_function("acl_off_parse", |b| {
        b.iter(|| black_box(Header::parse(black_box(&text)).unwrap().ext.is_some()))
    });
    g.bench_function("acl_on_one_pass", |b| {
        b.iter(|| {
            let mut ext = Header::parse_signed(black_box(&text)).unwrap().ext.unwrap();
            let fields = ext.signed.take().unwrap();
            black_box(rules.allows_fields(310, fields, black_box(&body), TOPIC))
        })
    });
    g.bench_function("acl_on_two_passes", |b| {
        b.iter(|| {
            let h = Header::parse(black_box(&text)).unwrap();
            black_box(h.ext.is_some() && rules.allows(310, &text, black_box(&body), TOPIC))
        })
    });
    g.bench_function("parse_signed_only", |b| {
        b.iter(|| {
            black_box(
                Header::parse_signed(black_box(&text))
                    .unwrap()
                    .ext
                    .unwrap()
                    .signed
                    .is_some(),
            )
        })
    });
    let key = Hmac::<Sha1>::new_from_slice(SECRET.as_bytes()).unwrap();
    let values: Vec<String> = entries().into_iter().map(|(_, v)| v).collect();
    g.bench_function("hmac_sha1_only", |b| {
        b.iter(|| {
            let mut mac = key.clone();
            for v in &values {
                mac.update(v.as_bytes());
            }
            mac.update(black_box(&body));
            black_box(mac.finalize().into_bytes())
        })
    });
    g.bench_function("sha1_only", |b| {
        use sha1::Digest;
        b.iter(|| black_box(Sha1::digest(black_box(&body))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
