//! Text fields of a row, built without per-row allocation: property strings parsed into byte
//! ranges, hosts and offset message ids formatted once per distinct address.
//!
//! Property rules are Java's (`MessageDecoder.string2messageProperties`, REMOTING.md §4.3):
//! entries `name \x01 value` joined by `\x02`; a segment without a name or a value is dropped;
//! the value runs from the first `\x01` to the segment's end; a later duplicate wins.

use std::io::Write;
use std::net::SocketAddr;

/// Byte ranges of one property: `(name start, name end, value start, value end)`.
pub type PropRange = (u32, u32, u32, u32);

/// Parse `props` into `out` (cleared first), in string order.
pub fn parse_properties(props: &str, out: &mut Vec<PropRange>) {
    out.clear();
    parse_into(props, out);
}

/// Bytes examined at a time by [`parse_into`].
const WORD: usize = 8;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `w` that is below 3 (exact per byte: `b & 0x7f` plus `0x7d`
/// cannot carry into the next byte, and reaches the high bit exactly when `b & 0x7f >= 3`).
#[inline(always)]
fn below_3(w: u64) -> u64 {
    !(((w & LOW7) + 0x7d7d_7d7d_7d7d_7d7d) | w) & HIGH
}

/// One pass over `props`, a word at a time: only the few bytes below 3 (the separators `\x01`
/// and `\x02`, or a NUL) are looked at one by one. Property strings are short (tens of
/// bytes), where a search per segment costs more than the scan.
fn parse_into(props: &str, out: &mut Vec<PropRange>) {
    let b = props.as_bytes();
    let mut start = 0usize;
    let mut first_sep = usize::MAX;
    let mut close = |start: usize, end: usize, sep: usize| {
        if sep != usize::MAX && sep > start && sep + 1 < end {
            out.push((start as u32, sep as u32, sep as u32 + 1, end as u32));
        }
    };
    let mut base = 0usize;
    while base < b.len() {
        let w = match b.get(base..base + WORD) {
            Some(c) => c.try_into().unwrap(),
            None => {
                let mut w = [0xffu8; WORD];
                w[..b.len() - base].copy_from_slice(&b[base..]);
                w
            }
        };
        let mut m = below_3(u64::from_le_bytes(w));
        while m != 0 {
            let i = base + (m.trailing_zeros() / 8) as usize;
            m &= m - 1;
            match b[i] {
                2 => {
                    close(start, i, first_sep);
                    start = i + 1;
                    first_sep = usize::MAX;
                }
                1 if first_sep == usize::MAX => first_sep = i,
                _ => {}
            }
        }
        base += WORD;
    }
    close(start, b.len(), first_sep);
}

/// The name of a parsed property.
#[inline]
pub fn name<'a>(props: &'a str, r: &PropRange) -> &'a str {
    // The separators are ASCII, so every range boundary is a char boundary.
    &props[r.0 as usize..r.1 as usize]
}

/// The value of a parsed property.
#[inline]
pub fn value<'a>(props: &'a str, r: &PropRange) -> &'a str {
    &props[r.2 as usize..r.3 as usize]
}

/// The name of a parsed property, as bytes (no char boundary checks: the hot path's form).
#[inline(always)]
pub fn name_bytes<'a>(props: &'a str, r: &PropRange) -> &'a [u8] {
    &props.as_bytes()[r.0 as usize..r.1 as usize]
}

/// The value of a parsed property, as bytes.
#[inline(always)]
pub fn value_bytes<'a>(props: &'a str, r: &PropRange) -> &'a [u8] {
    &props.as_bytes()[r.2 as usize..r.3 as usize]
}

/// The value of the last property called `key`.
pub fn last_value<'a>(props: &'a str, ranges: &[PropRange], key: &str) -> Option<&'a str> {
    ranges
        .iter()
        .rev()
        .find(|r| name(props, r) == key)
        .map(|r| value(props, r))
}

/// True if a later property has the same name as `ranges[i]` (which then loses).
pub fn overridden(props: &str, ranges: &[PropRange], i: usize) -> bool {
    let n = name(props, &ranges[i]);
    ranges[i + 1..].iter().any(|r| name(props, r) == n)
}

/// A parsed property string: its ranges, where the properties the row has columns for are,
/// and whether a name may repeat (only then must a map drop the earlier duplicates).
#[derive(Debug, Default, Clone)]
pub struct Props {
    pub ranges: Vec<PropRange>,
    tags: Option<usize>,
    keys: Option<usize>,
    uniq_key: Option<usize>,
    may_repeat: bool,
}

impl Props {
    /// Parse `props` (reusing this value's memory).
    pub fn parse(&mut self, props: &str) {
        self.ranges.clear();
        parse_into(props, &mut self.ranges);
        (self.tags, self.keys, self.uniq_key) = (None, None, None);
        let mut seen = 0u64;
        self.may_repeat = false;
        for (i, r) in self.ranges.iter().enumerate() {
            let n = name_bytes(props, r);
            match n {
                b"TAGS" => self.tags = Some(i),
                b"KEYS" => self.keys = Some(i),
                b"UNIQ_KEY" => self.uniq_key = Some(i),
                _ => {}
            }
            // A cheap signature of the name: equal names have equal bits.
            let bit = 1u64 << ((n.len() * 7 + n[0] as usize + n[n.len() - 1] as usize * 3) % 64);
            self.may_repeat |= seen & bit != 0;
            seen |= bit;
        }
    }
    pub fn clear(&mut self) {
        self.ranges.clear();
        (self.tags, self.keys, self.uniq_key, self.may_repeat) = (None, None, None, false);
    }
    #[inline]
    fn get<'a>(&self, props: &'a str, i: Option<usize>) -> Option<&'a [u8]> {
        i.map(|i| value_bytes(props, &self.ranges[i]))
    }
    /// `TAGS` (the last one, as every lookup here), as bytes of `props`.
    pub fn tags<'a>(&self, props: &'a str) -> Option<&'a [u8]> {
        self.get(props, self.tags)
    }
    pub fn keys<'a>(&self, props: &'a str) -> Option<&'a [u8]> {
        self.get(props, self.keys)
    }
    pub fn uniq_key<'a>(&self, props: &'a str) -> Option<&'a [u8]> {
        self.get(props, self.uniq_key)
    }
    /// Whether property `i` is dropped from a map because a later one has its name.
    #[inline]
    pub fn overridden(&self, props: &str, i: usize) -> bool {
        self.may_repeat && overridden(props, &self.ranges, i)
    }
}

/// `ip:port` text (`[v6]:port` for IPv6) of the last address asked for.
#[derive(Debug, Default, Clone)]
pub struct HostText {
    addr: Option<SocketAddr>,
    text: Vec<u8>,
}

impl HostText {
    /// The text of `a` (formatted again only when the address changes).
    #[inline(always)]
    pub fn get(&mut self, a: &SocketAddr) -> &[u8] {
        if self.addr != Some(*a) {
            self.set(a);
        }
        &self.text
    }
    #[cold]
    fn set(&mut self, a: &SocketAddr) {
        self.text.clear();
        let _ = write!(self.text, "{a}");
        self.addr = Some(*a);
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for b in bytes {
        out.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
    }
}

/// Uppercase hex of `v`, big-endian (16 digits), a word at a time: each nibble spread into its
/// own byte, then `'0'` added, and `'A' - '9' - 1` more where the nibble is above 9.
#[inline(always)]
fn hex_u64(v: u64) -> [u8; 16] {
    fn hex_u32(x: u32) -> [u8; 8] {
        let x = x as u64;
        let x = (x | x << 16) & 0x0000_ffff_0000_ffff;
        let x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
        let x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
        // Bit 4 of (nibble + 6) is set exactly when the nibble is above 9.
        let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
        (x + 0x3030_3030_3030_3030 + letters * 7).to_be_bytes()
    }
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hex_u32((v >> 32) as u32));
    out[8..].copy_from_slice(&hex_u32(v as u32));
    out
}

/// Offset message ids (REMOTING.md §5.1, uppercase hex of store ip, port and offset), with the
/// host part formatted once per store host.
#[derive(Debug, Default, Clone)]
pub struct MsgIdText {
    addr: Option<SocketAddr>,
    prefix: Vec<u8>,
}

impl MsgIdText {
    /// Append the id of the record at `offset` stored by `a`; returns its length.
    #[inline(always)]
    pub fn push(&mut self, out: &mut Vec<u8>, a: &SocketAddr, offset: i64) -> usize {
        if self.addr != Some(*a) {
            self.set(a);
        }
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(&hex_u64(offset as u64));
        self.prefix.len() + 16
    }
    #[cold]
    fn set(&mut self, a: &SocketAddr) {
        self.prefix.clear();
        match a {
            SocketAddr::V4(v4) => push_hex(&mut self.prefix, &v4.ip().octets()),
            SocketAddr::V6(v6) => push_hex(&mut self.prefix, &v6.ip().octets()),
        }
        push_hex(&mut self.prefix, &(a.port() as i32).to_be_bytes());
        self.addr = Some(*a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmq_store::message::{offset_msg_id_hex, properties_iter};

    #[test]
    fn properties_match_the_store_parser() {
        for p in [
            "",
            "A\u{1}1",
            "A\u{1}1\u{2}\u{1}x\u{2}B\u{1}\u{2}A\u{1}2\u{2}junk",
            "\u{2}\u{2}K\u{1}v\u{1}w\u{2}",
            "ü\u{1}é\u{2}TAGS\u{1}a b",
        ] {
            let mut r = Vec::new();
            parse_properties(p, &mut r);
            let ours: Vec<_> = r.iter().map(|x| (name(p, x), value(p, x))).collect();
            assert_eq!(ours, properties_iter(p).collect::<Vec<_>>(), "{p:?}");
        }
        let p = "A\u{1}1\u{2}B\u{1}x\u{2}A\u{1}2";
        let mut r = Vec::new();
        parse_properties(p, &mut r);
        assert_eq!(last_value(p, &r, "A"), Some("2"));
        assert_eq!(last_value(p, &r, "C"), None);
        assert!(overridden(p, &r, 0) && !overridden(p, &r, 1) && !overridden(p, &r, 2));
        let mut props = Props::default();
        props.parse("TAGS\u{1}a\u{2}KEYS\u{1}k\u{2}TAGS\u{1}b\u{2}UNIQ_KEY\u{1}U");
        let p = "TAGS\u{1}a\u{2}KEYS\u{1}k\u{2}TAGS\u{1}b\u{2}UNIQ_KEY\u{1}U";
        assert_eq!(
            (props.tags(p), props.keys(p), props.uniq_key(p)),
            (Some(&b"b"[..]), Some(&b"k"[..]), Some(&b"U"[..]))
        );
        assert!(props.overridden(p, 0) && !props.overridden(p, 2));
        props.parse("A\u{1}1\u{2}B\u{1}2");
        assert!(!props.overridden("A\u{1}1\u{2}B\u{1}2", 0));
        assert_eq!(props.tags("A\u{1}1\u{2}B\u{1}2"), None);
    }

    #[test]
    fn word_scan_matches_the_store_parser_on_random_strings() {
        let alphabet = [
            "\u{0}",
            "\u{1}",
            "\u{2}",
            "a",
            "KEY",
            "é",
            "\u{1}\u{1}",
            "\u{2}\u{2}",
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut r = Vec::new();
        for _ in 0..5000 {
            let mut p = String::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for k in 0..(x % 40) {
                p.push_str(alphabet[((x >> (k % 48)) as usize + k as usize * 7) % alphabet.len()]);
            }
            parse_properties(&p, &mut r);
            let ours: Vec<_> = r.iter().map(|x| (name(&p, x), value(&p, x))).collect();
            assert_eq!(ours, properties_iter(&p).collect::<Vec<_>>(), "{p:?}");
        }
    }

    #[test]
    fn hosts_and_ids() {
        let mut h = HostText::default();
        let a: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let b: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(h.get(&a), b"10.0.0.1:10911");
        assert_eq!(h.get(&b), b"[::1]:9");
        let mut m = MsgIdText::default();
        for (addr, off) in [
            (a, 0x1234),
            (a, i64::MAX),
            (b, 77),
            (a, -1),
            (a, 0x0123_4567_89ab_cdef),
        ] {
            let mut out = Vec::new();
            m.push(&mut out, &addr, off);
            assert_eq!(out, offset_msg_id_hex(&addr, off).into_bytes());
        }
    }
}
