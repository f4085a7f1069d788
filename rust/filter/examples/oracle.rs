//! The Rust side of the differential test against RocketMQ's Java filter (see
//! `rust/filter/oracle/README.md`). Reads lines from stdin, one answer per line:
//!
//! - `E\t<expression>\t<k=v;k=v>`: `TRUE`, `FALSE`, `NULL`, `EVAL_ERROR` or `PARSE_ERROR`
//!   (`\n` and `\t` in the expression are escapes);
//! - `B\t<key>\t<error rate>\t<expected>`: `m k [p1, p2, ...]`.

use std::io::{self, BufRead, Write};

use rmq_filter::{encode_properties, BloomFilter, Sql92Filter};

fn answer(line: &str) -> String {
    let p: Vec<&str> = line.split('\t').collect();
    if p[0] == "B" {
        let (f, n) = (p[2].parse().unwrap_or(0), p[3].parse().unwrap_or(0));
        return match BloomFilter::new(f, n) {
            Ok(b) => format!("{} {} {:?}", b.m(), b.k(), b.positions(p[1]).positions()),
            Err(_) => "BLOOM_ERROR".to_string(),
        };
    }
    let expr = p
        .get(1)
        .unwrap_or(&"")
        .replace("\\n", "\n")
        .replace("\\t", "\t");
    let pairs: Vec<(&str, &str)> = p
        .get(2)
        .filter(|s| !s.is_empty())
        .map(|s| s.split(';').filter_map(|kv| kv.split_once('=')).collect())
        .unwrap_or_default();
    let props = encode_properties(pairs);
    match Sql92Filter::compile(&expr) {
        Err(_) => "PARSE_ERROR".to_string(),
        Ok(f) => match f.evaluate_properties(&props) {
            Err(_) => "EVAL_ERROR".to_string(),
            Ok(None) => "NULL".to_string(),
            Ok(Some(b)) => if b { "TRUE" } else { "FALSE" }.to_string(),
        },
    }
}

fn main() {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for line in io::stdin().lock().lines().map_while(Result::ok) {
        let _ = writeln!(out, "{}", answer(&line));
    }
}
