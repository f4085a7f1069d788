//! SQL92 filtering on the pull path: evaluating the expression on every message versus testing
//! the bloom bits computed at dispatch. Messages carry ~1 KiB of properties (system ones plus
//! user ones plus padding), half of them match. Figures per message are in `RESULTS.md`.
//!
//! Run: `cargo bench -p rmq-filter --bench filter`.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rmq_filter::{bloom_key, compile, encode_properties, properties_iter, BloomFilter, FilterSet};

const MESSAGES: usize = 1024;
const PROPERTY_BYTES: usize = 1024;
const TOPIC: &str = "TopicTest";

/// One message's property string: RocketMQ's usual system properties, the user properties
/// `a` (0..10), `b` (x|y) and `c` (p|q|r), then padding up to ~1 KiB.
fn message_properties(rng: &mut StdRng, i: usize) -> String {
    let a = rng.gen_range(0..10).to_string();
    let b = if rng.gen_bool(0.5) { "x" } else { "y" };
    let c = ["p", "q", "r"][rng.gen_range(0..3)];
    let uniq = format!("7F0000010B6C18B4AAC2{i:012X}");
    let keys = format!("order-{i}");
    let mut pairs: Vec<(&str, &str)> = vec![
        ("UNIQ_KEY", &uniq),
        ("KEYS", &keys),
        ("TAGS", "TagA"),
        ("WAIT", "true"),
        ("MIN_OFFSET", "0"),
        ("MAX_OFFSET", "1024"),
        ("CLUSTER", "DefaultCluster"),
        ("a", &a),
        ("b", b),
        ("c", c),
    ];
    let base = encode_properties(pairs.iter().copied()).len();
    let pad = "z".repeat(PROPERTY_BYTES.saturating_sub(base + 8) / 4);
    let pads: Vec<String> = (0..4).map(|j| format!("p{j}")).collect();
    for name in &pads {
        pairs.push((name, &pad));
    }
    encode_properties(pairs)
}

fn messages() -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(42);
    (0..MESSAGES)
        .map(|i| message_properties(&mut rng, i))
        .collect()
}

const EXPRESSIONS: [(&str, &str); 2] = [
    ("2 predicates", "a > 4 AND b = 'x'"),
    ("3 predicates", "a > 4 AND b = 'x' OR c IN ('p', 'q')"),
];

fn bench_pull(c: &mut Criterion) {
    let msgs = messages();
    let avg = msgs.iter().map(String::len).sum::<usize>() / msgs.len();
    eprintln!("{MESSAGES} messages, {avg} bytes of properties each");
    let mut g = c.benchmark_group("pull");
    g.throughput(Throughput::Elements(MESSAGES as u64));
    g.measurement_time(Duration::from_secs(3));
    for (label, expr) in EXPRESSIONS {
        let filter = Arc::new(compile(expr).unwrap());
        let mut set = FilterSet::new(BloomFilter::default());
        let key = bloom_key("GID_bench", TOPIC);
        let positions = set.insert(&key, filter.clone());
        // Other groups on the topic fill the bitmaps too (false-positive pressure).
        for (n, other) in ["a < 2", "b = 'y' AND c = 'r'", "a BETWEEN 3 AND 6"]
            .into_iter()
            .enumerate()
        {
            set.insert(
                bloom_key(&format!("GID_{n}"), TOPIC),
                Arc::new(compile(other).unwrap()),
            );
        }
        let bitmaps: Vec<Vec<u8>> = msgs.iter().map(|p| set.compute_bitmap(p)).collect();
        let matching = msgs.iter().filter(|p| filter.matches_properties(p)).count();
        let hits = bitmaps.iter().filter(|b| positions.may_match(b)).count();
        eprintln!("{label}: {matching} of {MESSAGES} match; bloom passes {hits}");

        g.bench_function(format!("evaluate every message, {label}"), |bn| {
            bn.iter(|| msgs.iter().filter(|p| filter.matches_properties(p)).count())
        });
        g.bench_function(
            format!("evaluate every message via a HashMap (Java's way), {label}"),
            |bn| {
                bn.iter(|| {
                    msgs.iter()
                        .filter(|p| {
                            let map: HashMap<&str, &str> = properties_iter(p).collect();
                            filter.matches(|k| map.get(k).copied())
                        })
                        .count()
                })
            },
        );
        g.bench_function(format!("bloom bits, {label}"), |bn| {
            bn.iter(|| bitmaps.iter().filter(|b| positions.may_match(b)).count())
        });
        g.bench_function(
            format!("bloom bits, then evaluate the hits, {label}"),
            |bn| {
                bn.iter(|| {
                    msgs.iter()
                        .zip(&bitmaps)
                        .filter(|(p, b)| positions.may_match(b) && filter.matches_properties(p))
                        .count()
                })
            },
        );
    }
    g.finish();
}

fn bench_dispatch(c: &mut Criterion) {
    let msgs = messages();
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements(MESSAGES as u64));
    g.measurement_time(Duration::from_secs(3));
    for groups in [1usize, 8, 32] {
        let mut set = FilterSet::new(BloomFilter::default());
        for n in 0..groups {
            let expr = format!("a > {} AND b = 'x' OR c IN ('p', 'q')", n % 10);
            set.insert(
                bloom_key(&format!("GID_{n}"), TOPIC),
                Arc::new(compile(&expr).unwrap()),
            );
        }
        g.bench_function(format!("compute bitmap, {groups} groups"), |bn| {
            bn.iter_batched_ref(
                || vec![0u8; set.bitmap_len()],
                |out| {
                    for p in &msgs {
                        black_box(set.compute_bitmap_into(p, out));
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_pull, bench_dispatch);
criterion_main!(benches);
