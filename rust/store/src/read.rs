//! Reading messages back: the pull path (`getMessage`) and its result codes.

/// RocketMQ's GetMessageStatus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// The Java enum name (what the broker puts in the pull response remark).
    pub fn name(&self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// A tag filter over ConsumeQueue tag codes (`None` in [`GetRequest`] = subscribe `*`).
#[derive(Debug, Clone, Default)]
pub struct TagFilter {
    pub codes: Vec<i32>,
}

impl TagFilter {
    pub fn matches(&self, tags_code: i64) -> bool {
        self.codes.contains(&(tags_code as i32))
    }
}

/// An SQL92 subscription to apply while reading: `key` (`group#topic`) names its bloom bits.
#[derive(Clone, Copy)]
pub struct SqlFilter<'a> {
    pub filter: &'a rmq_filter::Sql92Filter,
    pub key: &'a str,
}

impl std::fmt::Debug for SqlFilter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqlFilter({:?}, {})", self.filter.expression(), self.key)
    }
}

/// What to read.
#[derive(Debug, Clone)]
pub struct GetRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub offset: i64,
    pub max_msgs: u32,
    /// Byte limit (0 = the store's `maxTransferBytesOnMessageInMemory`).
    pub max_bytes: u64,
    pub filter: Option<&'a TagFilter>,
    /// An SQL92 filter, evaluated on the record's properties (after the bloom check).
    pub sql: Option<SqlFilter<'a>>,
}

/// What came back: the raw records back to back, exactly as a pull response carries them.
#[derive(Debug, Clone)]
pub struct GetResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub buffer: Vec<u8>,
    pub message_count: u32,
    /// Queue offset of each returned message.
    pub queue_offsets: Vec<i64>,
}
