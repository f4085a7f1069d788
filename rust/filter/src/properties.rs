//! Reading a stored message's property string without building a map.
//!
//! RocketMQ encodes properties as `name \x01 value \x02 name \x01 value \x02 ...` (the last
//! separator optional). Java's `MessageDecoder.string2messageProperties` skips a segment with
//! an empty name or an empty value and lets a later duplicate win; so do these functions.

/// Between a property's name and its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// After each property.
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// Every `(name, value)` pair in order, duplicates included.
pub fn properties_iter(props: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut start = 0;
    segment_ends(props.as_bytes()).filter_map(move |end| {
        let seg = &props[start..end];
        start = end + 1;
        // The name ends at the first \x01 (the value may hold more); names are short.
        let eq = seg.bytes().position(|b| b == NAME_VALUE_SEPARATOR as u8)?;
        (eq > 0 && eq + 1 < seg.len()).then(|| (&seg[..eq], &seg[eq + 1..]))
    })
}

/// The value of `name` (the last one if repeated).
pub fn property<'a>(props: &'a str, name: &str) -> Option<&'a str> {
    properties_iter(props)
        .filter(|(k, _)| *k == name)
        .last()
        .map(|(_, v)| v)
}

/// Fill `slots[i]` with the value of `names[i]` in one pass over `props`. Names are
/// identifiers (no separators), so a segment holds `name` exactly when it starts with
/// `name \x01`; only the segment ends need searching.
pub(crate) fn fill_slots<'a>(props: &'a str, names: &[String], slots: &mut [Option<&'a str>]) {
    let bytes = props.as_bytes();
    let mut start = 0;
    for end in segment_ends(bytes) {
        let seg = &bytes[start..end];
        for (slot, name) in slots.iter_mut().zip(names) {
            let n = name.len();
            if seg.len() > n + 1
                && seg[n] == NAME_VALUE_SEPARATOR as u8
                && seg.starts_with(name.as_bytes())
            {
                *slot = Some(&props[start + n + 1..end]);
                break;
            }
        }
        start = end + 1;
    }
}

/// The end offset of every segment: each `\x02`, then the end of the string.
fn segment_ends(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(PROPERTY_SEPARATOR as u8, bytes).chain(std::iter::once(bytes.len()))
}

/// Encode `(name, value)` pairs the RocketMQ way (for tests and benchmarks).
pub fn encode_properties<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(k);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(v);
        out.push(PROPERTY_SEPARATOR);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_decoding_rules() {
        let p = "a\x011\x02\x01x\x02b\x01\x02c\x01y\x01z\x02a\x012";
        assert_eq!(property(p, "a"), Some("2"));
        assert_eq!(property(p, "b"), None); // empty value: skipped
        assert_eq!(property(p, ""), None); // empty name: skipped
        assert_eq!(property(p, "c"), Some("y\x01z")); // split at the first \x01
        assert_eq!(property("", "a"), None);
        let names = ["c".to_string(), "a".to_string(), "q".to_string()];
        let mut slots = [None; 3];
        fill_slots(p, &names, &mut slots);
        assert_eq!(slots, [Some("y\x01z"), Some("2"), None]);
        assert_eq!(encode_properties([("k", "v")]), "k\x01v\x02");
    }
}
