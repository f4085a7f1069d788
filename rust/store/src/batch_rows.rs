//! Columnar rows (Arrow's variable-size binary layout) cut into SEND_BATCH_MESSAGE bodies, as the
//! Spark sink sends them: each row a message of the batch (REMOTING.md §4.5) with the properties a
//! producer gives it (`TAGS`, `KEYS`, `WAIT`, a fresh `UNIQ_KEY`), without a Python object per row.

use std::fmt;

/// One column of variable-size binary or UTF-8 values in Arrow's layout: value `i` is
/// `data[offsets[offset + i] .. offsets[offset + i + 1]]` (32-bit little-endian offsets), null when
/// bit `offset + i` of `validity` is clear.
#[derive(Clone, Copy, Debug)]
pub struct BinaryColumn<'a> {
    offsets: &'a [u8],
    data: &'a [u8],
    validity: Option<&'a [u8]>,
    offset: usize,
    len: usize,
}

/// A value of a column or a row that cannot go as a message; `row` counts from the column's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub row: usize,
    pub what: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "row {}: {}", self.row, self.what)
    }
}

impl std::error::Error for RowError {}

impl<'a> BinaryColumn<'a> {
    /// Checks that the buffers hold `len` values from `offset` (a buffer too short, an offset going
    /// backwards or past `data` is an error).
    pub fn new(
        offsets: &'a [u8],
        data: &'a [u8],
        validity: Option<&'a [u8]>,
        offset: usize,
        len: usize,
    ) -> Result<Self, String> {
        let need = (offset + len + 1) * 4;
        if offsets.len() < need {
            return Err(format!(
                "offsets buffer has {} bytes, {len} values from {offset} need {need}",
                offsets.len()
            ));
        }
        if let Some(v) = validity {
            if v.len() * 8 < offset + len {
                return Err(format!(
                    "validity buffer has {} bytes for {} values",
                    v.len(),
                    offset + len
                ));
            }
        }
        let col = Self {
            offsets,
            data,
            validity,
            offset,
            len,
        };
        let mut prev = col.raw_offset(0);
        for i in 1..=len {
            let cur = col.raw_offset(i);
            if cur < prev || cur > data.len() {
                return Err(format!(
                    "offset {cur} of value {} is out of order or past the data",
                    i - 1
                ));
            }
            prev = cur;
        }
        Ok(col)
    }

    fn raw_offset(&self, i: usize) -> usize {
        let at = (self.offset + i) * 4;
        let b = &self.offsets[at..at + 4];
        i32::from_le_bytes([b[0], b[1], b[2], b[3]]).max(0) as usize
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Value `i`, `None` when null.
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        if let Some(v) = self.validity {
            let bit = self.offset + i;
            if v[bit / 8] & (1 << (bit % 8)) == 0 {
                return None;
            }
        }
        Some(&self.data[self.raw_offset(i)..self.raw_offset(i + 1)])
    }
}

/// Where the rows' `UNIQ_KEY`s come from: `base` (the producer's fixed prefix and time part) and a
/// 16-bit counter the rows take in turn, as `MessageClientIDSetter` makes them.
#[derive(Clone, Copy, Debug)]
pub struct UniqIds<'a> {
    pub base: &'a str,
    pub counter: u16,
}

/// One batch: its SEND_BATCH_MESSAGE body, its rows (`first`, `count`) and their ids, `,`-joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowBatch {
    pub body: Vec<u8>,
    pub first: usize,
    pub count: usize,
    pub uniq_ids: String,
}

/// What bounds the batches and the rows.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Rows per batch at most.
    pub max_rows: usize,
    /// A batch body's bytes at most (a row bigger than this goes as a batch of its own).
    pub max_bytes: usize,
    /// A row's body bytes at most (the producer's `maxMessageSize`).
    pub max_body: usize,
}

const SEPARATORS: [u8; 2] = [1, 2];

fn property_value<'a>(
    col: Option<&BinaryColumn<'a>>,
    row: usize,
    name: &str,
) -> Result<&'a [u8], RowError> {
    let Some(v) = col.and_then(|c| c.get(row)) else {
        return Ok(&[]);
    };
    if v.iter().any(|b| SEPARATORS.contains(b)) {
        return Err(RowError {
            row,
            what: format!(
                "column '{name}' holds a \\u0001 or \\u0002 character (RocketMQ's property separators)"
            ),
        });
    }
    if std::str::from_utf8(v).is_err() {
        return Err(RowError {
            row,
            what: format!("column '{name}' is not valid UTF-8"),
        });
    }
    Ok(v)
}

/// Rows `0..body.len()` as batches of up to `limits.max_rows` rows and `limits.max_bytes` bytes, in
/// row order. Each row's properties are `TAGS` (if its tag is neither null nor empty), `KEYS`
/// (likewise), `WAIT=true` and a new `UNIQ_KEY`. A null or empty body, a body over
/// `limits.max_body`, or a tag or key holding a property separator is an error naming the row.
pub fn encode_row_batches(
    body: &BinaryColumn<'_>,
    tags: Option<&BinaryColumn<'_>>,
    keys: Option<&BinaryColumn<'_>>,
    uniq: UniqIds<'_>,
    limits: Limits,
) -> Result<Vec<RowBatch>, RowError> {
    for c in [tags, keys].into_iter().flatten() {
        if c.len() != body.len() {
            return Err(RowError {
                row: c.len().min(body.len()),
                what: format!("columns have {} and {} rows", c.len(), body.len()),
            });
        }
    }
    let max_rows = limits.max_rows.max(1);
    let mut out = Vec::new();
    let mut cur = RowBatch {
        body: Vec::new(),
        first: 0,
        count: 0,
        uniq_ids: String::new(),
    };
    let mut counter = uniq.counter;
    let mut props = Vec::with_capacity(128);
    for row in 0..body.len() {
        let b = body.get(row).ok_or_else(|| RowError {
            row,
            what: "column 'body' is null".into(),
        })?;
        if b.is_empty() {
            return Err(RowError {
                row,
                what: "column 'body' is empty (RocketMQ refuses it)".into(),
            });
        }
        if b.len() > limits.max_body {
            return Err(RowError {
                row,
                what: format!(
                    "column 'body' has {} bytes, over the maximum {}",
                    b.len(),
                    limits.max_body
                ),
            });
        }
        let tag = property_value(tags, row, "tags")?;
        let key = property_value(keys, row, "keys")?;
        props.clear();
        if !tag.is_empty() {
            props.extend_from_slice(b"TAGS\x01");
            props.extend_from_slice(tag);
            props.push(2);
        }
        if !key.is_empty() {
            props.extend_from_slice(b"KEYS\x01");
            props.extend_from_slice(key);
            props.push(2);
        }
        props.extend_from_slice(b"WAIT\x01true\x02UNIQ_KEY\x01");
        let id_at = props.len();
        props.extend_from_slice(uniq.base.as_bytes());
        props.extend_from_slice(format!("{counter:04X}").as_bytes());
        counter = counter.wrapping_add(1);
        if props.len() > i16::MAX as usize {
            return Err(RowError {
                row,
                what: format!("properties of {} bytes, over 32767", props.len()),
            });
        }
        let size = 22 + b.len() + props.len();
        if cur.count > 0 && (cur.count >= max_rows || cur.body.len() + size > limits.max_bytes) {
            let next = RowBatch {
                body: Vec::new(),
                first: row,
                count: 0,
                uniq_ids: String::new(),
            };
            out.push(std::mem::replace(&mut cur, next));
        }
        if cur.count == 0 {
            cur.first = row;
            // Room for the rows this batch can take: by count, and by bytes (a big row alone).
            let rows = max_rows.min(body.len() - row);
            cur.body
                .reserve((size * rows).min(limits.max_bytes.max(size)));
        } else {
            cur.uniq_ids.push(',');
        }
        // The id is ASCII hex after the base, itself checked ASCII by the caller's str.
        cur.uniq_ids
            .push_str(std::str::from_utf8(&props[id_at..]).unwrap_or_default());
        let v = &mut cur.body;
        v.extend_from_slice(&(size as i32).to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes()); // magic code: the broker ignores it in a batch
        v.extend_from_slice(&0i32.to_be_bytes()); // body CRC: the broker computes it
        v.extend_from_slice(&0i32.to_be_bytes()); // flag
        v.extend_from_slice(&(b.len() as i32).to_be_bytes());
        v.extend_from_slice(b);
        v.extend_from_slice(&(props.len() as i16).to_be_bytes());
        v.extend_from_slice(&props);
        cur.count += 1;
    }
    if cur.count > 0 {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{decode_batch_body, encode_batch_body};

    /// Arrow buffers for `values` (`None` = null).
    fn column(values: &[Option<&[u8]>]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut offsets = vec![0u8; 4];
        let mut data = Vec::new();
        let mut validity = vec![0u8; values.len().div_ceil(8)];
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                data.extend_from_slice(v);
                validity[i / 8] |= 1 << (i % 8);
            }
            offsets.extend_from_slice(&(data.len() as i32).to_le_bytes());
        }
        (offsets, data, validity)
    }

    const LIMITS: Limits = Limits {
        max_rows: 32,
        max_bytes: 1 << 20,
        max_body: 4 << 20,
    };

    #[test]
    fn rows_encode_as_the_producer_encodes_them() {
        let (bo, bd, _) = column(&[Some(b"one"), Some(b"two")]);
        let (to, td, tv) = column(&[Some(b"TagA"), None]);
        let (ko, kd, kv) = column(&[Some(b"k1 k2"), Some(b"")]);
        let body = BinaryColumn::new(&bo, &bd, None, 0, 2).unwrap();
        let tags = BinaryColumn::new(&to, &td, Some(&tv), 0, 2).unwrap();
        let keys = BinaryColumn::new(&ko, &kd, Some(&kv), 0, 2).unwrap();
        let uniq = UniqIds {
            base: "7F0000010001000000000000ABCD",
            counter: 0xFFFF,
        };
        let got = encode_row_batches(&body, Some(&tags), Some(&keys), uniq, LIMITS).unwrap();
        let p0 = "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F0000010001000000000000ABCDFFFF";
        let p1 = "WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F0000010001000000000000ABCD0000";
        let want = encode_batch_body(&[(0, b"one", p0.as_bytes()), (0, b"two", p1.as_bytes())]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].body, want);
        assert_eq!((got[0].first, got[0].count), (0, 2));
        assert_eq!(
            got[0].uniq_ids,
            "7F0000010001000000000000ABCDFFFF,7F0000010001000000000000ABCD0000"
        );
        let items = decode_batch_body(&got[0].body, b"").unwrap();
        assert_eq!(items.len(), 2);
    }

    #[test]
    fn batches_are_cut_by_rows_and_bytes() {
        let bodies: Vec<Vec<u8>> = (0..10).map(|i| vec![b'a' + i as u8; 100]).collect();
        let vals: Vec<Option<&[u8]>> = bodies.iter().map(|b| Some(b.as_slice())).collect();
        let (bo, bd, _) = column(&vals);
        let body = BinaryColumn::new(&bo, &bd, None, 0, 10).unwrap();
        let uniq = UniqIds {
            base: "AB",
            counter: 0,
        };
        let by_rows = Limits {
            max_rows: 4,
            ..LIMITS
        };
        let got = encode_row_batches(&body, None, None, uniq, by_rows).unwrap();
        let cuts: Vec<(usize, usize)> = got.iter().map(|b| (b.first, b.count)).collect();
        assert_eq!(cuts, vec![(0, 4), (4, 4), (8, 2)]);
        // each row is 22 + 100 + 29 (WAIT + UNIQ_KEY with a 6-character id) = 151 bytes
        let by_bytes = Limits {
            max_bytes: 151 * 3,
            ..LIMITS
        };
        let got = encode_row_batches(&body, None, None, uniq, by_bytes).unwrap();
        let cuts: Vec<(usize, usize)> = got.iter().map(|b| (b.first, b.count)).collect();
        assert_eq!(cuts, vec![(0, 3), (3, 3), (6, 3), (9, 1)]);
        assert!(got.iter().all(|b| b.body.len() <= 151 * 3));
        let one = Limits {
            max_bytes: 10,
            ..LIMITS
        };
        let got = encode_row_batches(&body, None, None, uniq, one).unwrap();
        assert_eq!(got.len(), 10, "a row over max_bytes goes alone");
        let ids: Vec<String> = got.iter().map(|b| b.uniq_ids.clone()).collect();
        assert_eq!(ids[0], "AB0000");
        assert_eq!(ids[9], "AB0009");
    }

    #[test]
    fn bad_rows_are_named() {
        let (bo, bd, bv) = column(&[Some(b"x"), None]);
        let body = BinaryColumn::new(&bo, &bd, Some(&bv), 0, 2).unwrap();
        let uniq = UniqIds {
            base: "AB",
            counter: 0,
        };
        let err = encode_row_batches(&body, None, None, uniq, LIMITS).unwrap_err();
        assert_eq!(
            err,
            RowError {
                row: 1,
                what: "column 'body' is null".into()
            }
        );
        let (bo, bd, _) = column(&[Some(b"x"), Some(b"")]);
        let body = BinaryColumn::new(&bo, &bd, None, 0, 2).unwrap();
        assert_eq!(
            encode_row_batches(&body, None, None, uniq, LIMITS)
                .unwrap_err()
                .row,
            1
        );
        let (bo, bd, _) = column(&[Some(b"xyz")]);
        let body = BinaryColumn::new(&bo, &bd, None, 0, 1).unwrap();
        let small = Limits {
            max_body: 2,
            ..LIMITS
        };
        assert!(encode_row_batches(&body, None, None, uniq, small)
            .unwrap_err()
            .what
            .contains("over the maximum 2"));
        let (to, td, _) = column(&[Some(b"a\x01b")]);
        let tags = BinaryColumn::new(&to, &td, None, 0, 1).unwrap();
        let err = encode_row_batches(&body, Some(&tags), None, uniq, LIMITS).unwrap_err();
        assert!(
            err.what.contains("'tags'") && err.what.contains("separator"),
            "{err}"
        );
    }

    #[test]
    fn columns_honour_their_offset_and_reject_bad_buffers() {
        let (bo, bd, bv) = column(&[Some(b"a"), Some(b"bb"), None, Some(b"dddd")]);
        let col = BinaryColumn::new(&bo, &bd, Some(&bv), 1, 3).unwrap();
        assert_eq!(col.get(0), Some(&b"bb"[..]));
        assert_eq!(col.get(1), None);
        assert_eq!(col.get(2), Some(&b"dddd"[..]));
        assert!(
            BinaryColumn::new(&bo, &bd, None, 1, 4).is_err(),
            "too few offsets"
        );
        assert!(
            BinaryColumn::new(&bo, &bd[..3], None, 0, 4).is_err(),
            "offset past the data"
        );
        let mut back = bo.clone();
        back[4..8].copy_from_slice(&5i32.to_le_bytes());
        assert!(
            BinaryColumn::new(&back, &bd, None, 0, 4).is_err(),
            "offsets going backwards"
        );
    }
}
