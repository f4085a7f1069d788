//! A reader of frame headers in the plain JSON the clients write (flat objects of strings,
//! integers, `true` / `false` / `null`), for the send fast path.
//!
//! It takes a strict subset of what serde_json takes and returns what serde_json's `Header`
//! deserialization returns for it; anything outside the subset (a nested object or array, a
//! float, a number of more than 18 digits, a surrogate or an escaped key, a field twice, ...)
//! is `None`, and [`super::Header::parse`] hands the text to serde_json, which reads it or
//! fails as before. So this reader never decides what a header means; it only spares the
//! common case serde_json's generic machinery (a visitor per value, a scratch copy and then an
//! owned copy of every escaped string): the properties of every send carry `\u0001` /
//! `\u0002` escapes.

use std::borrow::Cow;

use super::{Ext, Field, Header, TextField, Value};

/// Read `text` as a frame header into `h`; `None` when it is not in the compact subset (`h` is
/// then left part-filled). `signed`: also gather every `extFields` entry as text
/// ([`Ext::signed`]).
pub(super) fn header<'a>(text: &'a str, signed: bool, h: &mut Header<'a>) -> Option<()> {
    let mut r = Reader {
        s: text.as_bytes(),
        text,
        i: 0,
    };
    r.ws();
    r.header(signed, h)?;
    r.ws();
    (r.i == r.s.len()).then_some(())
}

struct Reader<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

/// One value of the subset.
enum Scalar<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Bool(bool),
    Null,
}

impl<'a> Reader<'a> {
    /// JSON whitespace (the C load generator pads its opaque with spaces).
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// `{` then, for each member, its key and `f(self, key)` reading its value, then `}`.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            let key = self.key()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            f(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn header(&mut self, signed: bool, h: &mut Header<'a>) -> Option<()> {
        let (mut code, mut flag, mut opaque) = (None, None, None);
        // Filled in place: an `Ext` is a few hundred bytes, and each move of it was a memcpy.
        let ext = h.ext.insert(Ext::default());
        let (mut ext_seen, mut ext_object) = (false, false);
        self.object(|r, key| {
            let slot = match key {
                "code" => &mut code,
                "flag" => &mut flag,
                "opaque" => &mut opaque,
                "extFields" => {
                    if ext_seen {
                        return None; // a field twice
                    }
                    ext_seen = true;
                    if r.literal(b"null").is_none() {
                        r.ext(signed, ext)?;
                        ext_object = true;
                    }
                    return Some(());
                }
                _ => return r.scalar().map(drop), // skipped, as serde skips unknown fields
            };
            if slot.is_some() {
                return None;
            }
            let Scalar::Int(n) = r.scalar()? else {
                return None;
            };
            *slot = Some(i32::try_from(n).ok()?);
            Some(())
        })?;
        h.code = code?;
        h.flag = flag.unwrap_or(0);
        h.opaque = opaque.unwrap_or(0);
        if !ext_object {
            h.ext = None;
        }
        Some(())
    }

    fn ext(&mut self, signed: bool, e: &mut Ext<'a>) -> Option<()> {
        let mut seen = 0u32;
        if !signed {
            // Each value read straight into its field: a value returned and then stored costs
            // a stalled reload of it (its parts were written separately).
            return self.object(|r, key| {
                let Some((bit, slot)) = e.slot(key) else {
                    return r.scalar().map(drop);
                };
                if seen & (1 << bit) != 0 {
                    return None; // a field twice
                }
                seen |= 1 << bit;
                r.value_into(slot)
            });
        }
        let mut all: Vec<TextField<'a>> = Vec::with_capacity(if signed { 20 } else { 0 });
        let mut all_text = signed;
        self.object(|r, key| {
            let start = r.i;
            let value = r.scalar()?;
            if signed {
                // Every entry as text, for the signature: an integer or a boolean as written
                // (the reader takes only the forms whose text is the Python path's reading).
                match &value {
                    Scalar::Str(s) => all.push((Cow::Borrowed(key), s.clone())),
                    Scalar::Int(_) | Scalar::Bool(_) => {
                        all.push((Cow::Borrowed(key), Cow::Borrowed(r.text.get(start..r.i)?)));
                    }
                    Scalar::Null => all_text = false,
                }
            }
            e.set(key, value, &mut seen)
        })?;
        e.signed = all_text.then_some(all);
        Some(())
    }
}

impl<'a> Ext<'a> {
    /// Keep `value` when `key` is one of a send's fields (`None`: a field twice).
    #[inline]
    fn set(&mut self, key: &str, value: Scalar<'a>, seen: &mut u32) -> Option<()> {
        let Some((bit, slot)) = self.slot(key) else {
            return Some(());
        };
        if *seen & (1 << bit) != 0 {
            return None; // a field twice
        }
        *seen |= 1 << bit;
        *slot = match value {
            Scalar::Str(s) => Some(Value::Text(s)),
            Scalar::Int(n) => Some(Value::Int(n)),
            Scalar::Bool(b) => Some(Value::Text(Cow::Borrowed(if b { "true" } else { "false" }))),
            Scalar::Null => None,
        };
        Some(())
    }
}

impl<'a> Reader<'a> {
    /// An object key: a string without escapes.
    #[inline]
    fn key(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        self.run();
        if self.peek()? != b'"' {
            return None; // an escape or a control character
        }
        let key = self.text.get(start..self.i)?;
        self.i += 1;
        Some(key)
    }

    /// Move to the next byte that ends a run of plain string characters (`"`, `\\` or a
    /// control character), or to the end: eight bytes a step.
    #[inline]
    fn run(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH; // a zero byte's high bit, exact at the lowest
        while let Some(chunk) = self.s.get(self.i..self.i + 8) {
            let v = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            let stop = zero(v ^ (ONES * u64::from(b'"')))
                | zero(v ^ (ONES * u64::from(b'\\')))
                | (v.wrapping_sub(ONES * 0x20) & !v & HIGH); // a byte below 0x20
            if stop != 0 {
                self.i += (stop.trailing_zeros() / 8) as usize;
                return;
            }
            self.i += 8;
        }
        while let Some(&c) = self.s.get(self.i) {
            if c == b'"' || c == b'\\' || c < 0x20 {
                return;
            }
            self.i += 1;
        }
    }

    #[inline]
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.s.get(self.i..end)? == word).then(|| self.i = end)
    }

    #[inline]
    fn scalar(&mut self) -> Option<Scalar<'a>> {
        match self.peek()? {
            b'"' => self.string().map(Scalar::Str),
            b't' => self.literal(b"true").map(|_| Scalar::Bool(true)),
            b'f' => self.literal(b"false").map(|_| Scalar::Bool(false)),
            b'n' => self.literal(b"null").map(|_| Scalar::Null),
            b'-' | b'0'..=b'9' => self.integer().map(Scalar::Int),
            _ => None, // an object, an array, not JSON
        }
    }

    /// A JSON integer of at most 18 digits (no fraction, no exponent, no leading zero, not `-0`).
    #[inline]
    fn integer(&mut self) -> Option<i64> {
        let negative = self.eat(b'-').is_some();
        let start = self.i;
        let mut n: i64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            n = n * 10 + i64::from(c - b'0');
            self.i += 1;
            if self.i - start > 18 {
                return None;
            }
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.s[start] == b'0') || (negative && n == 0) {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None; // a float
        }
        Some(if negative { -n } else { n })
    }

    /// A value read into `slot` as [`Ext::set`] would keep it.
    #[inline]
    fn value_into(&mut self, slot: &mut Field<'a>) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.eat(b'"')?;
                let start = self.i;
                self.run();
                match self.peek()? {
                    b'"' => {
                        let v = self.text.get(start..self.i)?;
                        self.i += 1;
                        *slot = Some(Value::Text(Cow::Borrowed(v)));
                    }
                    b'\\' => *slot = Some(Value::Text(Cow::Owned(self.unescape(start)?))),
                    _ => return None, // a control character
                }
            }
            b't' => {
                self.literal(b"true")?;
                *slot = Some(Value::Text(Cow::Borrowed("true")));
            }
            b'f' => {
                self.literal(b"false")?;
                *slot = Some(Value::Text(Cow::Borrowed("false")));
            }
            b'n' => {
                self.literal(b"null")?;
                *slot = None;
            }
            b'-' | b'0'..=b'9' => *slot = Some(Value::Int(self.integer()?)),
            _ => return None, // an object, an array, not JSON
        }
        Some(())
    }

    /// A string value: borrowed when it has no escape, else unescaped into an owned copy.
    #[inline]
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i;
        self.run();
        match self.peek()? {
            b'"' => {
                let v = self.text.get(start..self.i)?;
                self.i += 1;
                Some(Cow::Borrowed(v))
            }
            b'\\' => self.unescape(start).map(Cow::Owned),
            _ => None, // a control character
        }
    }

    /// The rest of a string that started at `start` and has an escape at the reader's place,
    /// unescaped.
    fn unescape(&mut self, start: usize) -> Option<String> {
        let mut out = String::with_capacity(self.s.len() - start);
        out.push_str(self.text.get(start..self.i)?);
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(out);
                }
                b'\\' => {}
                _ => return None,
            }
            self.i += 1; // the backslash
            let c = self.peek()?;
            self.i += 1;
            out.push(match c {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let mut n = 0;
                    for &h in self.s.get(self.i..self.i + 4)? {
                        n = n * 16 + char::from(h).to_digit(16)?;
                    }
                    self.i += 4;
                    // A surrogate (half of a pair, or alone) is serde_json's to read.
                    char::from_u32(n)?
                }
                _ => return None,
            });
            let run = self.i;
            self.run();
            out.push_str(self.text.get(run..self.i)?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{CPP_SEND, JAVA_SEND};
    use super::*;

    /// Both readers on `text`: where the compact one reads it, serde_json reads the same.
    /// Returns whether the compact one read it.
    fn agree(text: &str) -> bool {
        let mut h = Header::EMPTY;
        let fast = header(text, false, &mut h).map(|()| h);
        // Gathering the entries as text (ACL on: another loop) reads the same header.
        let mut h = Header::EMPTY;
        let signed = header(text, true, &mut h).map(|()| h);
        assert_eq!(fast.is_some(), signed.is_some(), "{text}");
        if let (Some(f), Some(mut s)) = (&fast, signed) {
            if let Some(e) = s.ext.as_mut() {
                e.signed = None;
            }
            assert_eq!(f, &s, "{text}");
        }
        let slow = serde_json::from_str::<Header<'_>>(text);
        match (&fast, &slow) {
            (Some(f), Ok(s)) => {
                assert_eq!(f, s, "{text}");
                true
            }
            (Some(f), Err(e)) => panic!("compact read {text} as {f:?}; serde_json: {e}"),
            (None, _) => false,
        }
    }

    #[test]
    fn reads_what_the_clients_send_as_serde_json_does() {
        let python = r#"{"code":310,"language":"PYTHON","version":317,"opaque":12,"flag":0,"remark":null,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"3","f":"0","g":"1795548446992","h":"0","i":"UNIQ_KEY\u0001AC11000100002A9F0000000000000001\u0002WAIT\u0001true","j":"0","k":"false","m":"false"},"serializeTypeCurrentRPC":"JSON"}"#;
        for text in [
            format!(r#"{{"code":310,"extFields":{JAVA_SEND},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}}"#),
            format!(r#"{{"extFields":{CPP_SEND},"code":10,"flag":0,"language":"CPP","opaque":1,"remark":"","serializeTypeCurrentRPC":"JSON","version":0}}"#),
            python.to_string(),
            r#"{"code":11,"flag":0,"opaque":3,"extFields":{"consumerGroup":"g","queueOffset":"12","maxMsgNums":"32"}}"#.to_string(),
            r#"{"code":34}"#.to_string(),
            r#"{"code":34,"extFields":null}"#.to_string(),
            " {\"code\" : 310 ,\t\"opaque\":         7,\"extFields\":{ \"b\" :\"T\"\r\n} } \n".to_string(),
        ] {
            assert!(agree(&text), "the compact reader left {text} to serde_json");
        }
    }

    #[test]
    fn leaves_the_rest_to_serde_json() {
        for text in [
            r#"{"code":310,"extFields":{"b":"T","b":"U"}}"#, // a field twice
            r#"{"code":310,"code":311}"#,
            r#"{"code":310,"extFields":{},"extFields":{}}"#,
            r#"{"code":310,"extFields":{"e":1.5}}"#, // a float
            r#"{"code":310,"extFields":{"e":1e3}}"#,
            r#"{"code":310,"extFields":{"e":-0}}"#, // serde_json: a float
            r#"{"code":310,"extFields":{"e":01}}"#, // not JSON
            r#"{"code":310,"extFields":{"e":1234567890123456789}}"#, // 19 digits
            r#"{"code":310,"extFields":{"b":"\ud83d\ude00"}}"#, // a surrogate pair
            r#"{"code":310,"extFields":{"b":"\ud83d"}}"#, // a lone surrogate
            r#"{"code":310,"extFields":{"b":"\x"}}"#, // a bad escape
            r#"{"code":310,"extFields":{"b":"a	b"}}"#, // a raw control character
            r#"{"code":310,"extFields":{"\u0062":"T"}}"#, // an escaped key
            r#"{"code":310,"extFields":{"x":{"y":1}}}"#, // a nested value
            r#"{"code":310,"remark":[1]}"#,
            r#"{"code":"310"}"#,      // code as a string
            r#"{"code":2147483648}"#, // out of i32
            r#"{"code":310,"flag":null}"#,
            r#"{"flag":0}"#, // no code
            r#"{"code":310,"extFields":"x"}"#,
            r#"{"code":310,}"#,
            r#"{"code":310}x"#,
            r#"{"code":310"#,
            "",
        ] {
            let mut h = Header::EMPTY;
            assert!(header(text, false, &mut h).is_none(), "{text}");
        }
    }

    #[test]
    fn unescapes_as_serde_json_does() {
        for s in [
            r#"KEYS\u0001k0\u0002WAIT\u0001true"#,
            r#"\"\\\/\b\f\n\r\t"#,
            r#"\u00e9\u4e2d\u0000\uFFFF"#,
            r#"é中\u0041"#,
            r#"\u0001"#,
        ] {
            let text = format!(r#"{{"code":310,"extFields":{{"i":"{s}","b":"T"}}}}"#);
            assert!(agree(&text), "{text}");
        }
    }

    #[test]
    fn finds_quotes_escapes_and_control_characters_at_every_offset() {
        for k in 0..24 {
            let pad = "é".repeat(k % 3) + &"a".repeat(k);
            for (tail, read) in [
                ("", true),
                (r"\u0001x", true),
                (r#"\"y"#, true),
                ("\u{1}", false), // a raw control character
                ("\u{1f}zzzzzzzzz", false),
            ] {
                let text =
                    format!(r#"{{"code":310,"extFields":{{"{pad}":"{pad}{tail}{pad}","b":"T"}}}}"#);
                assert_eq!(agree(&text), read, "{text:?}");
            }
        }
    }

    /// A tiny deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn pick<'t>(&mut self, from: &[&'t str]) -> &'t str {
            from[self.next() as usize % from.len()]
        }
    }

    fn value(r: &mut Rng) -> String {
        const GOOD: &[&str] = &[
            "a", "T", "é", "中", "0", r"\u0001", r"\u0002", r"\u00e9", r"\n", r"\\", r#"\""#,
            r"\/", "\u{7f}", "KEYS",
        ];
        const BAD: &[&str] = &[r"\ud83d", r"\ude00", r"\x", "\t", " "];
        match r.next() % 16 {
            0..=7 => {
                let n = r.next() % 6;
                let s: String = (0..n)
                    .map(|_| {
                        if r.next().is_multiple_of(32) {
                            r.pick(BAD)
                        } else {
                            r.pick(GOOD)
                        }
                    })
                    .collect();
                format!("\"{s}\"")
            }
            8 => r
                .pick(&[
                    "0",
                    "1",
                    "-1",
                    "42",
                    "-0",
                    "01",
                    "1.5",
                    "1e2",
                    "2147483647",
                    "2147483648",
                    "-2147483649",
                    "999999999999999999",
                    "1234567890123456789",
                    "18446744073709551616",
                    "-",
                ])
                .to_string(),
            9 => r
                .pick(&["true", "false", "null", "null", "tru"])
                .to_string(),
            10 if r.next().is_multiple_of(4) => {
                r.pick(&["{}", "[]", r#"{"b":"T"}"#, "[1]"]).to_string()
            }
            _ => (r.next() % 100_000).to_string(),
        }
    }

    fn ext(r: &mut Rng) -> String {
        const KEYS: &[&str] = &[
            "b",
            "e",
            "f",
            "g",
            "h",
            "i",
            "j",
            "m",
            "topic",
            "queueId",
            "sysFlag",
            "bornTimestamp",
            "flag",
            "properties",
            "reconsumeTimes",
            "batch",
            "a",
            "c",
            "zz",
            "k",
            "n",
        ];
        let n = r.next() % 8;
        if r.next().is_multiple_of(64) {
            return r#"{"\u0062":"T"}"#.to_string(); // an escaped key
        }
        let members: Vec<String> = (0..n)
            .map(|_| format!("\"{}\":{}", r.pick(KEYS), value(r)))
            .collect();
        format!("{{{}}}", members.join(","))
    }

    #[test]
    fn agrees_with_serde_json_on_generated_headers() {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        let mut read = 0;
        const N: usize = 40_000;
        for _ in 0..N {
            let mut members = Vec::new();
            if !r.next().is_multiple_of(16) {
                let code = r.pick(&["310", "10", "320", "11", "-1", "310", "\"1\""]);
                members.push(format!("\"code\":{code}"));
            }
            for _ in 0..r.next() % 6 {
                let m = match r.next() % 10 {
                    0 => format!("\"code\":{}", value(&mut r)), // mostly a second code
                    1 => format!("\"flag\":{}", r.pick(&["0", "1", "2", "null"])),
                    2 => format!("\"opaque\":{}", value(&mut r)),
                    3..=5 => format!("\"extFields\":{}", ext(&mut r)),
                    _ => format!(
                        "\"{}\":{}",
                        r.pick(&["language", "version", "remark", "x"]),
                        value(&mut r)
                    ),
                };
                members.push(m);
            }
            let n = members.len();
            members.rotate_left(if n == 0 { 0 } else { r.next() as usize % n });
            let mut text = format!("{{{}}}", members.join(","));
            if r.next().is_multiple_of(8) {
                let at = (r.next() as usize) % (text.len() + 1);
                if text.is_char_boundary(at) {
                    text.insert(
                        at,
                        *r.pick(&[" ", ",", "}", "\""]).as_bytes().first().unwrap() as char,
                    );
                }
            }
            if agree(&text) {
                read += 1;
            }
        }
        // The generator reaches the compact reader often enough to mean something.
        assert!(read > N / 5, "the compact reader read only {read} of {N}");
    }
}
