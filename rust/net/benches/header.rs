//! What reading a send's JSON frame header costs the fast path (`Header::parse`, then the
//! send's fields checked): the header `benches/loadgen_c.c` sends (SEND_MESSAGE_V2 as the Java
//! 4.9 client writes it, 128-B class) and the C++ client's SEND_MESSAGE header.
//!
//! `cargo bench -p rmq-net --bench header`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rmq_net::header::Header;

/// SEND_MESSAGE_V2 as `benches/loadgen.py` writes its template (one request's values filled in).
const JAVA_V2: &str = concat!(
    r#"{"code":310,"extFields":{"a":"bench_pg","b":"BenchTopic","c":"TBW102","d":"4","e":"3","#,
    r#""f":"0","g":"1795548446992","h":"0","i":"UNIQ_KEY\u0001bench-7f000001-0000000001A3\u0002"#,
    r#"WAIT\u0001true\u0002TAGS\u0001bench","j":"0","k":"false","m":"false"},"flag":0,"#,
    r#""language":"JAVA","opaque":      1234,"serializeTypeCurrentRPC":"JSON","version":409}"#
);

/// SEND_MESSAGE as the C++ client 0.4.4 writes it.
const CPP: &str = concat!(
    r#"{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"","batch":"0","#,
    r#""bornTimestamp":"1795548431611","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"#,
    r#""producerGroup":"g1","properties":"KEYS\u0001k0\u0002UNIQ_KEY\u00010100007F00001FFA00007A27"#,
    r#"FC7F0100\u0002WAIT\u0001true\u0002","queueId":0,"reconsumeTimes":"0","sysFlag":0,"#,
    r#""topic":"CapT","unitMode":"0"},"flag":0,"language":"CPP","opaque":5,"#,
    r#""serializeTypeCurrentRPC":"JSON","version":317}"#
);

fn read(text: &str) -> usize {
    let mut h = Header::EMPTY;
    Header::parse_into(text, false, &mut h).expect("a header");
    let ext = h.ext.as_ref().expect("extFields");
    let f = ext.send_header(h.code).expect("a send's fields");
    f.topic.len() + f.properties.len() + f.queue_id as usize
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("send_header");
    g.bench_function("java_v2", |b| {
        b.iter(|| black_box(read(black_box(JAVA_V2))))
    });
    g.bench_function("cpp", |b| b.iter(|| black_box(read(black_box(CPP)))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
