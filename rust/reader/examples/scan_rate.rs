//! Decode rate of a store's whole CommitLog into Arrow-layout columns (all columns, CRC checked),
//! as the Spark reader's workers run it but without Python: a harness for profiling the reader.
//!
//! ```text
//! cargo run --release -p rmq-reader --example scan_rate -- <store dir> [runs] [batch rows] [splits]
//! ```
//!
//! Each split opens its own view (fresh mappings), as each Spark partition does; `splits` reads
//! only the first few (a short run for `valgrind --tool=cachegrind`). Prints ns per row of each
//! run and the best.

use std::path::Path;
use std::time::Instant;

use rmq_reader::buffers;
use rmq_reader::decode::decode_scan;
use rmq_reader::{ColumnSet, DecodeOptions, RecordFilter, StoreView};

fn main() {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .expect("usage: scan_rate <store dir> [runs] [batch rows] [splits]");
    let mut num = |default: usize| {
        args.next()
            .map_or(default, |s| s.parse().expect("a number"))
    };
    let (runs, rows, max_splits) = (num(3), num(16384), num(usize::MAX));
    let open = || StoreView::open(Path::new(&root), None, true).expect("open store");
    let view = open();
    let end = view.committed_end(None).expect("committed end");
    let filter = RecordFilter::default();
    let mut splits = view.plan_scan(&filter, end, 128 << 20).expect("plan");
    splits.truncate(max_splits);
    let opts = DecodeOptions {
        columns: ColumnSet::ALL,
        max_rows: rows,
        max_bytes: 64 << 20,
        skip_damage: false,
    };
    let mut best = f64::MAX;
    for _ in 0..runs {
        let t0 = Instant::now();
        let mut n = 0usize;
        for s in &splits {
            let view = open();
            let mut pos = s.start;
            loop {
                let b = decode_scan(view.log(), s, pos, &filter, &opts).expect("decode");
                n += b.columns.rows();
                // As the binding does when Python drops a batch: buffers go back to the pool.
                let f = std::hint::black_box(b.columns.finish());
                for c in f.columns {
                    c.buffers.into_iter().flatten().for_each(buffers::recycle);
                }
                if b.done {
                    break;
                }
                pos = b.next;
            }
        }
        let ns = t0.elapsed().as_secs_f64() * 1e9 / n.max(1) as f64;
        best = best.min(ns);
        println!("{n} rows: {ns:.0} ns/row");
    }
    println!("best: {best:.0} ns/row ({:.0} rows/s)", 1e9 / best);
}
