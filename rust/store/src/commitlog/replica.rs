//! CommitLog replication primitives (RocketMQ's HA transfer): the master reads raw ranges of its
//! log, the slave appends them verbatim at the same offsets, into the same files.
//!
//! A range read stops at the end of the file holding its start (like RocketMQ's
//! `CommitLog.getData`), so a transfer never spans files; the end-of-file blank record and the
//! padding after it travel like any other bytes. Transfer chunks are cut by size, not by record:
//! a slave's log may end inside a record, which dispatch waits for and recovery cuts off (the
//! slave then asks again from the last complete record).

use std::sync::atomic::Ordering;

use crate::commitlog::{CommitLog, LogSlice};
use crate::error::{Result, StoreError};
use crate::message::{self, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE};

/// Where a replicated append must start, and why not elsewhere.
const NOT_AT_END: &str = " (a slave appends only where its log ends)";
const NOT_A_FILE_START: &str = " (an empty slave log may only start at a CommitLog file boundary)";

impl CommitLog {
    /// Up to `max_len` bytes of the log from `offset`, not past the end of the file holding
    /// `offset` nor past what is written. `None` when nothing is there (at or past the end,
    /// below the first file, or `max_len` 0).
    pub fn read_raw(&self, offset: i64, max_len: usize) -> Option<LogSlice> {
        if offset < 0 || max_len == 0 {
            return None;
        }
        let file = self.mfq.find(offset as u64)?;
        let pos = (offset as u64 - file.from_offset()) as usize;
        let len = file.wrote_position().saturating_sub(pos).min(max_len);
        if len == 0 {
            return None;
        }
        Some(LogSlice { file, pos, len })
    }

    /// Append replicated log bytes verbatim at `offset`, which must be where the replicated
    /// log ends (or, when the log holds nothing yet, a file boundary: a new slave starts where
    /// its master's last file starts). Bytes crossing a file end continue in the next file.
    ///
    /// Only whole records (and whole end-of-file blanks) reach the files; the bytes of a record
    /// still incomplete wait in memory for the rest, so a log cut by a crash always ends at a
    /// record boundary (a record's tail is not covered by its CRC, so recovery could not tell a
    /// torn one). An append at the end of the files instead of after the waiting bytes drops
    /// them (the master resent from the boundary after a reconnect).
    ///
    /// Returns the end of the log in the files: the offset to acknowledge and to resume from.
    pub fn append_raw(&self, offset: i64, data: &[u8]) -> Result<i64> {
        let mut st = self.put.lock();
        // A slave takes no sends, so nothing is deferred; were anything, it goes first.
        self.write_deferred_locked(&mut st)?;
        let end = self.max_offset();
        let expected = end + st.raw_pending.len() as i64;
        let fresh = end == 0 && self.mfq.files().iter().all(|f| f.wrote_position() == 0);
        if offset == end && !st.raw_pending.is_empty() {
            st.raw_pending.clear();
        } else if fresh && st.raw_pending.is_empty() {
            let file_size = self.mfq.file_size() as i64;
            if offset < 0 || offset % file_size != 0 {
                return Err(StoreError::ReplicaOffset {
                    offset,
                    log_end: expected,
                    hint: NOT_A_FILE_START,
                });
            }
            if self
                .mfq
                .first_file()
                .is_some_and(|f| f.from_offset() as i64 != offset)
            {
                // Empty files of an earlier start (never written): begin again at `offset`.
                self.mfq.truncate_dirty(0)?;
                self.mfq.discard_last_if_empty();
            }
        } else if offset != expected {
            return Err(StoreError::ReplicaOffset {
                offset,
                log_end: expected,
                hint: NOT_AT_END,
            });
        }
        if data.is_empty() {
            return Ok(end);
        }
        let start = if st.raw_pending.is_empty() {
            offset
        } else {
            st.raw_pending_at
        };
        let joined;
        let buf: &[u8] = if st.raw_pending.is_empty() {
            data
        } else {
            let mut v = std::mem::take(&mut st.raw_pending);
            v.extend_from_slice(data);
            joined = v;
            &joined
        };
        let (whole, last_ts) = self.whole_records(start, buf)?;
        self.write_raw(start, &buf[..whole])?;
        st.raw_pending = buf[whole..].to_vec();
        st.raw_pending_at = start + whole as i64;
        if last_ts > 0 {
            st.last_store_ts = st.last_store_ts.max(last_ts);
            self.last_store_ts.fetch_max(last_ts, Ordering::AcqRel);
        }
        drop(st);
        let new_end = start + whole as i64;
        if whole > 0 {
            self.appended_to(new_end);
        }
        Ok(new_end)
    }

    /// Write `data` at `at`, the end of the files (the put lock held), rolling to new files.
    fn write_raw(&self, mut at: i64, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let file = match self.mfq.last_file() {
                Some(f) if !f.is_full() => f,
                None => {
                    self.check_headroom()?;
                    self.mfq.last_or_create(at as u64)?
                }
                Some(_) => self.start_segment()?,
            };
            let pos = file.wrote_position();
            if file.from_offset() as i64 + pos as i64 != at {
                return Err(StoreError::corrupt(
                    "replicated append",
                    format!(
                        "the log ends at {} instead of {at}",
                        file.from_offset() as usize + pos
                    ),
                ));
            }
            let n = data.len().min(file.size() - pos);
            self.reserve(&file, pos + n)?;
            self.write_bytes(&file, pos, &data[..n])?;
            if let Some(ts) = last_timestamp_in(&data[..n]) {
                file.set_last_store_timestamp(ts as u64);
            }
            file.set_wrote_position(pos + n);
            at += n as i64;
            data = &data[n..];
        }
        Ok(())
    }

    /// How many leading bytes of `buf` (log bytes from `start`, a record boundary) are whole
    /// records or whole end-of-file blanks, and the newest store timestamp among them. Bytes
    /// that are no record (a damaged master log) are taken as they are, up to their file's end:
    /// dispatch steps over them as over damage found by recovery.
    ///
    /// An end-of-file blank padding to another end than this log's files end at means the
    /// master's `mappedFileSizeCommitLog` differs: refused, as the copy could not be read.
    fn whole_records(&self, start: i64, buf: &[u8]) -> Result<(usize, i64)> {
        let file_size = self.mfq.file_size() as i64;
        let mut p = 0usize;
        let mut last_ts = 0i64;
        while p + 8 <= buf.len() {
            let at = start + p as i64;
            let to_file_end = (file_size - at % file_size) as usize;
            let total = message::read_i32(buf, p).unwrap_or(0);
            let magic = message::read_i32(buf, p + 4).unwrap_or(0);
            let len = if magic == BLANK_MAGIC_CODE {
                if total as usize != to_file_end {
                    return Err(StoreError::Config(format!(
                        "replicated end-of-file blank at offset {at} pads {total} bytes, but this \
                         store's CommitLog file ends {to_file_end} bytes later: \
                         mappedFileSizeCommitLog differs from the master's"
                    )));
                }
                to_file_end
            } else if magic == MESSAGE_MAGIC_CODE
                && total >= message::RECORD_FIXED_SIZE_V4 as i32
                && total as usize <= to_file_end
            {
                total as usize
            } else {
                to_file_end.min(buf.len() - p)
            };
            if p + len > buf.len() {
                break;
            }
            if magic == MESSAGE_MAGIC_CODE {
                if let Some(ts) = record_timestamp(&buf[p..p + len]) {
                    last_ts = last_ts.max(ts);
                }
            }
            p += len;
        }
        Ok((p, last_ts))
    }
}

/// Store timestamp of a whole message record.
fn record_timestamp(rec: &[u8]) -> Option<i64> {
    let flag = message::read_i32(rec, message::POS_SYSFLAG)?;
    message::read_i64(rec, message::store_timestamp_pos(flag))
}

/// Store timestamp of the last whole record in `data` (whole records from its start).
fn last_timestamp_in(data: &[u8]) -> Option<i64> {
    let mut p = 0usize;
    let mut ts = None;
    while p + 8 <= data.len() {
        let total = message::read_i32(data, p)?;
        if message::read_i32(data, p + 4)? != MESSAGE_MAGIC_CODE
            || total < message::RECORD_FIXED_SIZE_V4 as i32
            || p + total as usize > data.len()
        {
            break;
        }
        ts = record_timestamp(&data[p..p + total as usize]).or(ts);
        p += total as usize;
    }
    ts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageRef;
    use std::path::Path;

    fn log(dir: &Path, file_size: u64) -> CommitLog {
        CommitLog::with_preallocation(
            dir,
            file_size,
            "127.0.0.1:10911".parse().unwrap(),
            1 << 20,
            false,
            false,
        )
    }

    fn msg<'a>(topic: &'a str, body: &'a [u8]) -> MessageRef<'a> {
        MessageRef {
            topic,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:5000".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: b"",
        }
    }

    /// Copy `master` into `slave` from `from` in chunks of `chunk` bytes, as the HA transfer does.
    fn replicate(master: &CommitLog, slave: &CommitLog, mut from: i64, chunk: usize) -> usize {
        let mut frames = 0;
        while let Some(s) = master.read_raw(from, chunk) {
            slave.append_raw(from, s.bytes()).unwrap();
            from += s.len() as i64;
            frames += 1;
        }
        frames
    }

    fn bytes_of(l: &CommitLog) -> Vec<(u64, Vec<u8>)> {
        l.queue()
            .files()
            .iter()
            .map(|f| {
                (
                    f.from_offset(),
                    f.raw_from(0)[..f.wrote_position()].to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn read_raw_stops_at_the_file_end_and_the_written_end() {
        let d = tempfile::tempdir().unwrap();
        let cl = log(d.path(), 4096);
        let mut ends = Vec::new();
        for i in 0..40 {
            ends.push(
                cl.put(&msg("T", format!("body-{i:04}").repeat(8).as_bytes()))
                    .unwrap(),
            );
        }
        assert!(cl.queue().files().len() >= 2);
        let first = cl.read_raw(0, 1 << 20).unwrap();
        assert_eq!(
            first.len(),
            4096,
            "a read ends at its file's end (blank included)"
        );
        let tail = cl.read_raw(4096, 1 << 20).unwrap();
        assert_eq!(4096 + tail.len() as i64, cl.max_offset());
        assert_eq!(cl.read_raw(10, 5).unwrap().len(), 5);
        assert!(cl.read_raw(cl.max_offset(), 100).is_none());
        assert!(cl.read_raw(-1, 100).is_none());
    }

    #[test]
    fn replicated_log_is_byte_identical_across_files_in_any_chunking() {
        for chunk in [7usize, 100, 333, 4096, 1 << 20] {
            let d = tempfile::tempdir().unwrap();
            let master = log(&d.path().join("m"), 4096);
            let slave = log(&d.path().join("s"), 4096);
            for i in 0..60 {
                master
                    .put(&msg("T", format!("m{i}").repeat(i % 13 + 1).as_bytes()))
                    .unwrap();
            }
            replicate(&master, &slave, 0, chunk);
            assert_eq!(slave.max_offset(), master.max_offset(), "chunk {chunk}");
            assert_eq!(bytes_of(&slave), bytes_of(&master), "chunk {chunk}");
            assert_eq!(slave.last_store_timestamp(), master.last_store_timestamp());
            assert!(slave.put.lock().raw_pending.is_empty());
        }
    }

    #[test]
    fn append_elsewhere_than_the_end_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let master = log(&d.path().join("m"), 4096);
        let slave = log(&d.path().join("s"), 4096);
        let mut ends = Vec::new();
        for i in 0..10 {
            ends.push(
                master
                    .put(&msg("T", format!("x{i}").as_bytes()))
                    .unwrap()
                    .end_offset(),
            );
        }
        let two = ends[1];
        let s = master.read_raw(0, two as usize).unwrap();
        // An empty log starts only at a file boundary.
        let e = slave.append_raw(100, s.bytes()).unwrap_err();
        assert!(e.to_string().contains("file boundary"), "{e}");
        assert_eq!(slave.append_raw(0, s.bytes()).unwrap(), two);
        for bad in [0, two - 1, two + 1, 4096] {
            let e = slave.append_raw(bad, b"abc").unwrap_err();
            assert!(
                matches!(e, StoreError::ReplicaOffset { offset, log_end, .. } if offset == bad && log_end == two),
                "{e}"
            );
        }
        // Part of a record waits in memory: the files end at the last whole one.
        let part = master.read_raw(two, 10).unwrap();
        assert_eq!(slave.append_raw(two, part.bytes()).unwrap(), two);
        assert_eq!(slave.max_offset(), two);
        let rest = master.read_raw(two + 10, 1000).unwrap();
        assert_eq!(
            slave.append_raw(two + 10, rest.bytes()).unwrap(),
            master.max_offset()
        );
        // Resending from the end of the files drops what waited.
        let slave2 = log(&d.path().join("s2"), 4096);
        slave2
            .append_raw(0, master.read_raw(0, 10).unwrap().bytes())
            .unwrap();
        assert_eq!(slave2.max_offset(), 0);
        slave2
            .append_raw(0, master.read_raw(0, 4096).unwrap().bytes())
            .unwrap();
        assert_eq!(bytes_of(&slave2), bytes_of(&master));
    }

    #[test]
    fn a_master_with_another_file_size_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let master = log(&d.path().join("m"), 4096);
        let slave = log(&d.path().join("s"), 8192);
        while master.max_offset() < 4096 + 10 {
            master.put(&msg("T", b"0123456789abcdef")).unwrap();
        }
        let first = master.read_raw(0, 8192).unwrap();
        let e = slave.append_raw(0, first.bytes()).unwrap_err();
        assert!(
            e.to_string().contains("mappedFileSizeCommitLog differs"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_log_starts_at_the_masters_last_file() {
        let d = tempfile::tempdir().unwrap();
        let master = log(&d.path().join("m"), 4096);
        let slave = log(&d.path().join("s"), 4096);
        while master.max_offset() < 3 * 4096 + 100 {
            master.put(&msg("T", b"0123456789abcdef")).unwrap();
        }
        let start = master.max_offset() - master.max_offset() % 4096;
        replicate(&master, &slave, start, 1000);
        assert_eq!(slave.min_offset(), start);
        assert_eq!(slave.max_offset(), master.max_offset());
        assert_eq!(bytes_of(&slave)[0], bytes_of(&master)[3]);
    }
}
