//! Read-ahead for readers walking the CommitLog forward (pulls draining a backlog).
//!
//! The CommitLog is read through its mappings, so a backlog that is not in the page cache is
//! read by page faults. The kernel's read-around for a fault is small (and none at all in the
//! file still being appended to, which asks for small folios with `MADV_RANDOM`, see
//! [`crate::mapped_file::MappedFile::advise_appending`]): a cold drain waits for the disk once
//! every few pages. [`ReadAhead`] follows up to [`STREAMS`] forward readers and, a window ahead
//! of each, asks the kernel to start reading (`MADV_WILLNEED`, asynchronous); the window starts
//! at [`START_WINDOW`] and doubles each time the reader keeps going, up to [`MAX_WINDOW`], as
//! the kernel's own readahead grows; it is topped up each time the reader has used an eighth
//! of it, so the disk keeps a window's worth of reads queued.
//!
//! Cost on warm data: one lock and a few compares per pull, and per eighth of a window passed
//! eight one-page `mincore` calls, which find the window cached and advise nothing.
//!
//! This type only decides *which* ranges to advise ([`ReadAhead::on_read`]); the CommitLog maps
//! them onto its files.

use parking_lot::Mutex;

/// Readers followed at once (e.g. consumer groups at different points of a backlog).
pub const STREAMS: usize = 4;
/// The first window of a new reader: small, so a one-off read costs little.
pub const START_WINDOW: u64 = 1 << 20;
/// The largest window: enough to keep a disk busy while the reader copies what has arrived.
pub const MAX_WINDOW: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    /// Advised up to here (exclusive); 0 = unused slot.
    until: u64,
    window: u64,
    /// Pull count at last use, for replacing the least recently used stream.
    used: u64,
}

/// Forward-reader tracking for one log (see the module docs).
#[derive(Debug, Default)]
pub struct ReadAhead {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    streams: [Stream; STREAMS],
    clock: u64,
}

impl ReadAhead {
    pub fn new() -> ReadAhead {
        ReadAhead::default()
    }

    /// A reader is at `offset`; data ends at `end` (nothing is advised past it). Returns the
    /// byte range `[from, to)` to advise now, if any.
    pub fn on_read(&self, offset: u64, end: u64) -> Option<(u64, u64)> {
        let mut st = self.state.lock();
        st.clock += 1;
        let now = st.clock;
        // A reader near a stream's advised edge (behind it by at most two windows, or past it
        // by at most one: the pulls of several queues interleave in the log) continues it;
        // of several such streams, the one used last (an old reader that stopped near here
        // must not capture a live one).
        let hit = (0..STREAMS)
            .filter(|&i| {
                let s = &st.streams[i];
                let w = s.window.max(START_WINDOW);
                s.until != 0 && offset + 2 * w >= s.until && offset <= s.until + w
            })
            .max_by_key(|&i| st.streams[i].used);
        let s = match hit {
            Some(i) => &mut st.streams[i],
            None => {
                let i = (0..STREAMS)
                    .min_by_key(|&i| st.streams[i].used)
                    .unwrap_or(0);
                st.streams[i] = Stream {
                    until: offset,
                    window: START_WINDOW / 2,
                    used: now,
                };
                &mut st.streams[i]
            }
        };
        s.used = now;
        // Top up once the reader has used an eighth of the window: the disk always has most
        // of a window to read ahead of the reader instead of a sawtooth down to half of it.
        if s.until >= end || s.until.saturating_sub(offset) > s.window - s.window / 8 {
            return None;
        }
        s.window = (s.window * 2).clamp(START_WINDOW, MAX_WINDOW);
        let from = s.until.max(offset);
        let to = (offset + s.window).min(end);
        if to <= from {
            return None;
        }
        s.until = to;
        Some((from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_reader_gets_growing_windows_ahead_and_each_byte_once() {
        let ra = ReadAhead::new();
        let end = 1 << 34;
        let mut advised: Vec<(u64, u64)> = Vec::new();
        let mut off = 0u64;
        while off < 256 << 20 {
            if let Some(r) = ra.on_read(off, end) {
                advised.push(r);
            }
            off += 32 << 10; // a pull of 32 KiB
        }
        assert_eq!(advised[0], (0, START_WINDOW));
        // Contiguous, never overlapping, always ahead of the reader.
        for w in advised.windows(2) {
            assert_eq!(w[0].1, w[1].0, "{advised:?}");
        }
        let sizes: Vec<u64> = advised.iter().map(|(a, b)| b - a).collect();
        assert!(sizes.iter().any(|&s| s >= MAX_WINDOW / 2), "{sizes:?}");
        assert!(advised.last().unwrap().1 >= 256 << 20);
        // Far fewer calls than pulls (8192).
        assert!(advised.len() < 128, "{}", advised.len());
    }

    #[test]
    fn nothing_is_advised_past_the_end() {
        let ra = ReadAhead::new();
        assert_eq!(ra.on_read(0, 100_000), Some((0, 100_000)));
        assert_eq!(ra.on_read(50_000, 100_000), None);
        assert_eq!(ra.on_read(100_000, 100_000), None);
    }

    #[test]
    fn separate_readers_keep_their_own_streams() {
        let ra = ReadAhead::new();
        let end = 1 << 34;
        let a = 0u64;
        let b = 8u64 << 30;
        assert_eq!(ra.on_read(a, end), Some((a, a + START_WINDOW)));
        assert_eq!(ra.on_read(b, end), Some((b, b + START_WINDOW)));
        // Both continue where they were advised up to, without starting over.
        let next_a = ra.on_read(a + START_WINDOW / 2, end).unwrap();
        assert_eq!(next_a.0, a + START_WINDOW);
        let next_b = ra.on_read(b + START_WINDOW / 2, end).unwrap();
        assert_eq!(next_b.0, b + START_WINDOW);
    }

    #[test]
    fn a_stream_that_stopped_near_the_end_does_not_capture_a_live_reader() {
        let ra = ReadAhead::new();
        let end = 256u64 << 20;
        // An earlier reader went all the way to the end.
        let mut off = 0;
        while off < end {
            ra.on_read(off, end);
            off += 32 << 10;
        }
        // A new reader from the start keeps getting read-ahead up to the end.
        let mut advised_until = 0;
        let mut off = 0;
        while off < end {
            if let Some((_, to)) = ra.on_read(off, end) {
                advised_until = to;
            }
            off += 32 << 10;
        }
        assert_eq!(advised_until, end);
    }

    #[test]
    fn reads_inside_the_window_advise_nothing_more() {
        let ra = ReadAhead::new();
        let end = 1 << 34;
        assert!(ra.on_read(0, end).is_some());
        assert_eq!(ra.on_read(4096, end), None);
        assert_eq!(ra.on_read(START_WINDOW / 16, end), None);
    }
}
