//! The row schema and its columns in Arrow's memory layout, built one record at a time.
//!
//! Buffers are what `pyarrow.Array.from_buffers` takes (little-endian, LSB-first bitmaps):
//!
//! | kind | buffers |
//! |---|---|
//! | `Int32`, `Int64`, `Timestamp` (µs since the epoch, UTC) | validity (always none), values |
//! | `Bool` | validity (none), bits |
//! | `Utf8`, `Binary` | validity (none when no row is null), i32 offsets, data |
//! | `Utf8Map` | validity, i32 entry offsets, key offsets, key data, value offsets, value data |
//!
//! Property rules are Java's (`MessageDecoder.string2messageProperties`): segments without a
//! name or a value are dropped and a later duplicate wins; map keys are unique.

use std::net::SocketAddr;

use rmq_store::message::{sysflag, Record};

use crate::buffers::{alloc, Bits, Map, Var};
use crate::filter::Class;
use crate::text::{HostText, MsgIdText, Props};

/// The Arrow type family of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Utf8,
    Binary,
    Int32,
    Int64,
    /// Microseconds since the epoch (UTC) as i64.
    Timestamp,
    Bool,
    /// `map<string, string>`.
    Utf8Map,
}

/// One column of the row schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Column {
    Topic,
    QueueId,
    QueueOffset,
    CommitlogOffset,
    StoreSize,
    Sysflag,
    Flag,
    BornTimestamp,
    StoreTimestamp,
    BornHost,
    StoreHost,
    ReconsumeTimes,
    PreparedTransactionOffset,
    Tags,
    Keys,
    UniqKey,
    MsgId,
    OffsetMsgId,
    Properties,
    Body,
    BodySize,
    IsTransactionPrepared,
    IsSystemTopic,
    Visible,
}

/// Name, type and nullability of a column.
#[derive(Debug, Clone, Copy)]
pub struct ColumnDef {
    pub column: Column,
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
}

const fn def(column: Column, name: &'static str, kind: Kind, nullable: bool) -> ColumnDef {
    ColumnDef {
        column,
        name,
        kind,
        nullable,
    }
}

/// The row schema, in order.
pub const COLUMNS: &[ColumnDef] = &[
    def(Column::Topic, "topic", Kind::Utf8, false),
    def(Column::QueueId, "queue_id", Kind::Int32, false),
    def(Column::QueueOffset, "queue_offset", Kind::Int64, false),
    def(
        Column::CommitlogOffset,
        "commitlog_offset",
        Kind::Int64,
        false,
    ),
    def(Column::StoreSize, "store_size", Kind::Int32, false),
    def(Column::Sysflag, "sysflag", Kind::Int32, false),
    def(Column::Flag, "flag", Kind::Int32, false),
    def(
        Column::BornTimestamp,
        "born_timestamp",
        Kind::Timestamp,
        false,
    ),
    def(
        Column::StoreTimestamp,
        "store_timestamp",
        Kind::Timestamp,
        false,
    ),
    def(Column::BornHost, "born_host", Kind::Utf8, false),
    def(Column::StoreHost, "store_host", Kind::Utf8, false),
    def(
        Column::ReconsumeTimes,
        "reconsume_times",
        Kind::Int32,
        false,
    ),
    def(
        Column::PreparedTransactionOffset,
        "prepared_transaction_offset",
        Kind::Int64,
        false,
    ),
    def(Column::Tags, "tags", Kind::Utf8, true),
    def(Column::Keys, "keys", Kind::Utf8, true),
    def(Column::UniqKey, "uniq_key", Kind::Utf8, true),
    def(Column::MsgId, "msg_id", Kind::Utf8, false),
    def(Column::OffsetMsgId, "offset_msg_id", Kind::Utf8, false),
    def(Column::Properties, "properties", Kind::Utf8Map, false),
    // Nullable: a body stored compressed that does not inflate reads as null when asked.
    def(Column::Body, "body", Kind::Binary, true),
    // The body's length as stored (compressed when sysflag COMPRESSED): a narrow stand-in for
    // `length(body)` that reads no body bytes.
    def(Column::BodySize, "body_size", Kind::Int32, false),
    def(
        Column::IsTransactionPrepared,
        "is_transaction_prepared",
        Kind::Bool,
        false,
    ),
    def(Column::IsSystemTopic, "is_system_topic", Kind::Bool, false),
    def(Column::Visible, "visible", Kind::Bool, false),
];

impl Column {
    pub fn def(self) -> &'static ColumnDef {
        &COLUMNS[self as usize]
    }
    pub fn by_name(name: &str) -> Option<Column> {
        COLUMNS.iter().find(|d| d.name == name).map(|d| d.column)
    }
}

/// A set of columns, in schema order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSet(u32);

impl ColumnSet {
    pub const ALL: ColumnSet = ColumnSet((1 << COLUMNS.len() as u32) - 1);
    pub const NONE: ColumnSet = ColumnSet(0);
    pub fn with(self, c: Column) -> ColumnSet {
        ColumnSet(self.0 | 1 << c as u32)
    }
    pub fn contains(self, c: Column) -> bool {
        self.0 & (1 << c as u32) != 0
    }
    pub fn iter(self) -> impl Iterator<Item = Column> {
        COLUMNS
            .iter()
            .map(|d| d.column)
            .filter(move |&c| self.contains(c))
    }
    /// The set of the named columns; the first unknown name is returned as the error.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<ColumnSet, String> {
        names.into_iter().try_fold(ColumnSet::NONE, |s, n| {
            Column::by_name(n).map(|c| s.with(c)).ok_or(n.to_string())
        })
    }
    fn needs_properties(self) -> bool {
        [
            Column::Tags,
            Column::Keys,
            Column::UniqKey,
            Column::MsgId,
            Column::Properties,
        ]
        .into_iter()
        .any(|c| self.contains(c))
    }
}

#[derive(Debug, Clone)]
enum Builder {
    Fixed(Vec<u8>),
    Bool(Bits),
    Var(Var),
    Map(Map),
}

/// One finished column: its identity and its Arrow buffers (see the module doc).
#[derive(Debug)]
pub struct ColumnBuffers {
    pub column: Column,
    pub buffers: Vec<Option<Vec<u8>>>,
}

/// Columns being built. Rows are appended with [`Columns::push`] (or [`Columns::push_null`]
/// for a row that could not be decoded, which makes the row validity bitmap appear).
///
/// Builders sit in a slot per column (`None` when the column is not read), so appending a row
/// is straight-line code: one well-predicted test per column, no dispatch on the column.
#[derive(Debug, Clone)]
pub struct Columns {
    set: ColumnSet,
    needs_properties: bool,
    slots: Vec<Option<Builder>>,
    rows: usize,
    row_validity: Option<Bits>,
    bytes: usize,
    compressed: Vec<(u32, i32, i64)>,
    /// Scratch: the current row's parsed properties.
    props: Props,
    born_host: HostText,
    store_host: HostText,
    msg_ids: MsgIdText,
}

/// Finished columns: rows, each column's buffers (schema order), the row validity bitmap
/// (`None` when every row is valid) and the `(row, sysflag, commitlog offset)` of rows whose
/// body is stored compressed (sysflag COMPRESSED; only when the body column was built).
#[derive(Debug)]
pub struct Finished {
    pub rows: usize,
    pub columns: Vec<ColumnBuffers>,
    pub row_validity: Option<Vec<u8>>,
    pub compressed: Vec<(u32, i32, i64)>,
}

#[inline(always)]
fn fixed(slot: &mut Option<Builder>, v: &[u8]) {
    if let Some(Builder::Fixed(b)) = slot {
        b.extend_from_slice(v);
    }
}

#[inline(always)]
fn flag(slot: &mut Option<Builder>, v: bool) {
    if let Some(Builder::Bool(b)) = slot {
        b.push(v);
    }
}

#[inline(always)]
fn var(slot: &mut Option<Builder>) -> Option<&mut Var> {
    match slot {
        Some(Builder::Var(v)) => Some(v),
        _ => None,
    }
}

#[inline(always)]
fn push_msg_id(ids: &mut MsgIdText, v: &mut Var, host: &SocketAddr, offset: i64) -> usize {
    let n = ids.push(&mut v.data, host, offset);
    v.end();
    n
}

impl Columns {
    /// Empty columns for `set`, sized for about `rows` rows of `body_bytes` body bytes.
    pub fn new(set: ColumnSet, rows: usize, body_bytes: usize) -> Columns {
        let slots = COLUMNS
            .iter()
            .map(|d| {
                set.contains(d.column).then(|| match d.kind {
                    Kind::Int32 => Builder::Fixed(alloc(rows * 4)),
                    Kind::Int64 | Kind::Timestamp => Builder::Fixed(alloc(rows * 8)),
                    Kind::Bool => Builder::Bool(Bits::with_capacity(rows)),
                    Kind::Binary => Builder::Var(Var::new(rows, body_bytes)),
                    Kind::Utf8 => Builder::Var(Var::new(rows, rows * 32)),
                    Kind::Utf8Map => Builder::Map(Map::new(rows)),
                })
            })
            .collect();
        Columns {
            set,
            needs_properties: set.needs_properties(),
            slots,
            rows: 0,
            row_validity: None,
            bytes: 0,
            compressed: Vec::new(),
            props: Props::default(),
            born_host: HostText::default(),
            store_host: HostText::default(),
            msg_ids: MsgIdText::default(),
        }
    }

    pub fn set(&self) -> ColumnSet {
        self.set
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Bytes held by the variable-width columns (to bound a batch).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Append the row of `rec`, stored at CommitLog offset `offset`.
    pub fn push(&mut self, offset: i64, rec: &Record<'_>, class: Class) {
        use Column as C;
        let props = rec.properties;
        if self.needs_properties {
            self.props.parse(props);
        }
        let parsed = &self.props;
        let s = &mut self.slots;
        let slot = |c: C| c as usize;
        let mut bytes = 0usize;
        if let Some(v) = var(&mut s[slot(C::Topic)]) {
            bytes += v.push(rec.topic.as_bytes());
        }
        fixed(&mut s[slot(C::QueueId)], &rec.queue_id.to_le_bytes());
        fixed(
            &mut s[slot(C::QueueOffset)],
            &rec.queue_offset.to_le_bytes(),
        );
        fixed(&mut s[slot(C::CommitlogOffset)], &offset.to_le_bytes());
        fixed(&mut s[slot(C::StoreSize)], &rec.total_size.to_le_bytes());
        fixed(&mut s[slot(C::Sysflag)], &rec.sys_flag.to_le_bytes());
        fixed(&mut s[slot(C::Flag)], &rec.flag.to_le_bytes());
        let born_us = rec.born_timestamp.saturating_mul(1000);
        fixed(&mut s[slot(C::BornTimestamp)], &born_us.to_le_bytes());
        let store_us = rec.store_timestamp.saturating_mul(1000);
        fixed(&mut s[slot(C::StoreTimestamp)], &store_us.to_le_bytes());
        if let Some(v) = var(&mut s[slot(C::BornHost)]) {
            bytes += v.push(self.born_host.get(&rec.born_host));
        }
        if let Some(v) = var(&mut s[slot(C::StoreHost)]) {
            bytes += v.push(self.store_host.get(&rec.store_host));
        }
        fixed(
            &mut s[slot(C::ReconsumeTimes)],
            &rec.reconsume_times.to_le_bytes(),
        );
        fixed(
            &mut s[slot(C::PreparedTransactionOffset)],
            &rec.prepared_transaction_offset.to_le_bytes(),
        );
        if self.needs_properties {
            let uniq = parsed.uniq_key(props);
            if let Some(v) = var(&mut s[slot(C::Tags)]) {
                bytes += v.push_opt(parsed.tags(props));
            }
            if let Some(v) = var(&mut s[slot(C::Keys)]) {
                bytes += v.push_opt(parsed.keys(props));
            }
            if let Some(v) = var(&mut s[slot(C::UniqKey)]) {
                bytes += v.push_opt(uniq);
            }
            if let Some(v) = var(&mut s[slot(C::MsgId)]) {
                bytes += match uniq {
                    Some(u) => v.push(u),
                    None => push_msg_id(&mut self.msg_ids, v, &rec.store_host, offset),
                };
            }
            if let Some(Builder::Map(m)) = &mut s[slot(C::Properties)] {
                bytes += m.push_props(props, parsed);
            }
        }
        if let Some(v) = var(&mut s[slot(C::OffsetMsgId)]) {
            bytes += push_msg_id(&mut self.msg_ids, v, &rec.store_host, offset);
        }
        if let Some(v) = var(&mut s[slot(C::Body)]) {
            bytes += v.push_long(rec.body);
            if rec.sys_flag & sysflag::COMPRESSED != 0 {
                self.compressed
                    .push((self.rows as u32, rec.sys_flag, offset));
            }
        }
        fixed(
            &mut s[slot(C::BodySize)],
            &(rec.body.len() as i32).to_le_bytes(),
        );
        flag(&mut s[slot(C::IsTransactionPrepared)], class.prepared);
        flag(&mut s[slot(C::IsSystemTopic)], class.system_topic);
        flag(&mut s[slot(C::Visible)], class.visible);
        if let Some(v) = &mut self.row_validity {
            v.push(true);
        }
        self.rows += 1;
        self.bytes += bytes;
    }

    /// Append a null row: every column gets a zero, empty or null value and the row is
    /// marked null in the row validity bitmap.
    pub fn push_null(&mut self) {
        for (d, b) in COLUMNS.iter().zip(&mut self.slots) {
            match b {
                None => {}
                Some(Builder::Fixed(v)) => {
                    let width = if d.kind == Kind::Int32 { 4 } else { 8 };
                    v.extend(std::iter::repeat_n(0u8, width));
                }
                Some(Builder::Bool(bits)) => bits.push(false),
                Some(Builder::Var(v)) if d.nullable => v.push_null(),
                Some(Builder::Var(v)) => _ = v.push(b""),
                Some(Builder::Map(m)) => m.push_empty(),
            }
        }
        let rows = self.rows;
        self.row_validity
            .get_or_insert_with(|| Bits::with_ones(rows))
            .push(false);
        self.rows += 1;
    }

    /// Append the row of a record with no CommitLog position of its own (a record decoded
    /// from a caller's buffer): its PHYSICALOFFSET field stands for the offset.
    pub fn push_detached(&mut self, rec: &Record<'_>) {
        self.push(rec.physical_offset, rec, crate::filter::classify(rec));
    }

    /// The buffers of every column, in schema order.
    pub fn finish(self) -> Finished {
        let columns = COLUMNS
            .iter()
            .zip(self.slots)
            .filter_map(|(d, b)| {
                let buffers = match b? {
                    Builder::Fixed(v) => vec![None, Some(v)],
                    Builder::Bool(bits) => vec![None, Some(bits.into_bytes())],
                    Builder::Var(v) => v.finish(),
                    Builder::Map(m) => m.finish(),
                };
                Some(ColumnBuffers {
                    column: d.column,
                    buffers,
                })
            })
            .collect();
        Finished {
            rows: self.rows,
            columns,
            row_validity: self.row_validity.map(Bits::into_bytes),
            compressed: self.compressed,
        }
    }
}

/// Build a `map<string, string>` column from property strings (`None` = a null row).
pub fn properties_column<'a>(rows: impl Iterator<Item = Option<&'a str>>) -> Vec<Option<Vec<u8>>> {
    let mut m = Map::new(0);
    let mut validity: Option<Bits> = None;
    let mut parsed = Props::default();
    for (n, r) in rows.enumerate() {
        match r {
            Some(p) => {
                parsed.parse(p);
                m.push_props(p, &parsed);
                if let Some(v) = &mut validity {
                    v.push(true);
                }
            }
            None => {
                m.push_empty();
                validity
                    .get_or_insert_with(|| Bits::with_ones(n))
                    .push(false);
            }
        }
    }
    let mut out = m.finish();
    out[0] = validity.map(Bits::into_bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmq_store::message::decode;

    fn i32s(b: &[u8]) -> Vec<i32> {
        b.chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn schema_names_are_unique_and_ordered() {
        for (i, d) in COLUMNS.iter().enumerate() {
            assert_eq!(d.column as usize, i);
            assert_eq!(Column::by_name(d.name), Some(d.column));
        }
        assert_eq!(ColumnSet::ALL.iter().count(), COLUMNS.len());
        assert_eq!(ColumnSet::from_names(["x"]), Err("x".to_string()));
    }

    #[test]
    fn rows_in_arrow_layout() {
        let props = "TAGS\u{1}a\u{2}K\u{1}1\u{2}K\u{1}2\u{2}\u{1}bad";
        let b = crate::testutil::record_bytes("T", 3, 9, 4096, b"hello", props, 1_700_000_000_123);
        let r = decode(&b, true).unwrap();
        let set = ColumnSet::from_names([
            "topic",
            "store_timestamp",
            "tags",
            "keys",
            "msg_id",
            "properties",
            "visible",
            "store_host",
            "body_size",
        ])
        .unwrap();
        let mut cols = Columns::new(set, 2, 16);
        cols.push(4096, &r, crate::filter::classify(&r));
        cols.push_null();
        let f = cols.finish();
        let (rows, out, validity) = (f.rows, f.columns, f.row_validity);
        assert_eq!(rows, 2);
        assert_eq!(validity, Some(vec![0b01]));
        let get = |c: Column| &out.iter().find(|x| x.column == c).unwrap().buffers;
        let topic = get(Column::Topic);
        assert_eq!(topic[0], None);
        assert_eq!(i32s(topic[1].as_ref().unwrap()), [0, 1, 1]);
        assert_eq!(topic[2].as_deref(), Some(&b"T"[..]));
        let ts = get(Column::StoreTimestamp)[1].as_ref().unwrap();
        assert_eq!(
            i64::from_le_bytes(ts[..8].try_into().unwrap()),
            1_700_000_000_123_000
        );
        let keys = get(Column::Keys);
        assert_eq!(keys[0].as_deref(), Some(&[0b00u8][..]));
        let msg_id = get(Column::MsgId)[2].as_ref().unwrap();
        assert_eq!(&msg_id[..], b"0A00000100002A9F0000000000001000");
        assert_eq!(
            get(Column::StoreHost)[2].as_deref(),
            Some(&b"10.0.0.1:10911"[..])
        );
        let map = get(Column::Properties);
        assert_eq!(i32s(map[1].as_ref().unwrap()), [0, 2, 2]);
        assert_eq!(map[3].as_deref(), Some(&b"TAGSK"[..]));
        assert_eq!(map[5].as_deref(), Some(&b"a2"[..]));
        assert_eq!(get(Column::Visible)[1].as_deref(), Some(&[0b01u8][..]));
        // The stored body's length, without its bytes; 0 for the null row.
        assert_eq!(i32s(get(Column::BodySize)[1].as_ref().unwrap()), [5, 0]);
        assert!(out.iter().all(|c| c.column != Column::Body));
    }

    #[test]
    fn properties_column_rules() {
        let out = properties_column([Some("A\u{1}1\u{2}A\u{1}2\u{2}B\u{1}x"), None].into_iter());
        assert_eq!(out[0].as_deref(), Some(&[0b01u8][..]));
        assert_eq!(i32s(out[1].as_ref().unwrap()), [0, 2, 2]);
        assert_eq!(out[3].as_deref(), Some(&b"AB"[..]));
        assert_eq!(out[5].as_deref(), Some(&b"2x"[..]));
    }
}
