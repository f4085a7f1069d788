//! Nothing panics on any input: random token soup, random bytes, and random property strings,
//! on a 1 MiB thread stack. Valid expressions also round-trip through their canonical form.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rmq_filter::{compile, encode_properties, property, Sql92Filter};

const PIECES: &[&str] = &[
    "a",
    "b",
    "c",
    "$x",
    "_y",
    "a1",
    " ",
    " ",
    " ",
    "(",
    ")",
    "'",
    "''",
    "'x'",
    "'5'",
    ",",
    "=",
    "<>",
    "<",
    ">",
    "<=",
    ">=",
    "+",
    "-",
    "--",
    "\n",
    "/*",
    "*/",
    ".",
    "0",
    "1",
    "5",
    "9",
    "e",
    "E",
    "L",
    "1.5",
    ".5",
    "1e3",
    "9223372036854775807",
    "9223372036854775808",
    "AND",
    "and",
    "OR",
    "NOT",
    "not",
    "IN",
    "BETWEEN",
    "IS",
    "NULL",
    "TRUE",
    "FALSE",
    "#",
    "!",
    "\"",
    "é",
    "\u{1F680}",
    "\0",
    "\t",
];

const VALUES: &[&str] = &[
    "1",
    "5",
    "6",
    "-3",
    "1.5",
    "x",
    "abc",
    "true",
    "NaN",
    "Infinity",
    " 7",
    "1e3",
    "5f",
    "",
    "9223372036854775808",
    "\u{1F680}",
    "\u{1}",
    "'",
];

fn random_expr(rng: &mut StdRng) -> String {
    (0..rng.gen_range(0..30))
        .map(|_| PIECES[rng.gen_range(0..PIECES.len())])
        .collect()
}

fn random_props(rng: &mut StdRng) -> String {
    if rng.gen_bool(0.1) {
        // raw bytes with separators sprinkled in
        let bytes: Vec<u8> = (0..rng.gen_range(0..40))
            .map(|_| {
                *[1u8, 2, b'a', b'b', b'5', 0xff, 0xc3]
                    .get(rng.gen_range(0..7))
                    .unwrap()
            })
            .collect();
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    let mut pairs = Vec::new();
    for k in ["a", "b", "c", "$x"] {
        if rng.gen_bool(0.7) {
            pairs.push((k, VALUES[rng.gen_range(0..VALUES.len())]));
        }
    }
    encode_properties(pairs)
}

fn check(f: &Sql92Filter, props: &str) {
    let direct = f.evaluate_properties(props);
    let looked_up = f.evaluate(|k| property(props, k));
    assert_eq!(direct, looked_up, "{} on {props:?}", f.expression());
    let again = compile(&f.canonical())
        .unwrap_or_else(|e| panic!("canonical {:?} of {:?}: {e}", f.canonical(), f.expression()));
    assert_eq!(again.canonical(), f.canonical());
    assert_eq!(
        again.evaluate_properties(props),
        direct,
        "{}",
        f.canonical()
    );
}

fn run(seed: u64, cases: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut compiled = 0;
    for i in 0..cases {
        let expr = if i % 10 == 0 {
            let bytes: Vec<u8> = (0..rng.gen_range(0..24)).map(|_| rng.gen()).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            random_expr(&mut rng)
        };
        if let Ok(f) = compile(&expr) {
            compiled += 1;
            for _ in 0..4 {
                check(&f, &random_props(&mut rng));
            }
        }
    }
    compiled
}

#[test]
fn random_inputs_never_panic() {
    let compiled = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| run(0x5eed, 60_000))
        .unwrap()
        .join()
        .expect("no panic");
    // Token soup is mostly malformed, but enough of it compiles to exercise evaluation.
    assert!(compiled > 1_000, "only {compiled} compiled");
}
