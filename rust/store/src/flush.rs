//! CommitLog flushing, chosen by `flushDiskType`:
//!
//! * `ASYNC_FLUSH` — every `flushIntervalCommitLog` ms flush if at least
//!   `flushCommitLogLeastPages` pages are dirty, and everything at least every
//!   `flushCommitLogThoroughInterval` ms (RocketMQ's FlushRealTimeService).
//! * `SYNC_FLUSH` — group commit: writers publish the offset they need durable and the
//!   flush thread flushes everything appended so far in one `msync`, which covers every
//!   writer waiting at that moment (RocketMQ's GroupCommitService).
//!
//! Either way the flushed watermark is published through [`FlushWatermark`]: Rust callers
//! block on it with a timeout; an event loop watches its eventfd and compares offsets, so
//! waiting never needs a thread per writer.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::commitlog::CommitLog;
use crate::config::FlushDiskType;
use crate::error::{Result, StoreError};
use crate::service::{Notifier, Service, ServiceContext, Signal};

/// How long the group-commit thread waits for more requests before flushing, per step...
const GATHER_STEP: Duration = Duration::from_micros(20);
/// ...and at most in all.
const GATHER_MAX: Duration = Duration::from_micros(300);
/// Group-commit flushes in flight at once (threads).
const GROUP_COMMIT_DEPTH: usize = 2;

/// The durable-offset watermark: everything below `flushed()` is on disk.
pub struct FlushWatermark {
    flushed: AtomicI64,
    requested: AtomicI64,
    /// Number of flush requests so far (to tell one writer from many).
    requests: std::sync::atomic::AtomicU64,
    /// Wakes the flush thread (new request) .
    request_signal: Arc<Signal>,
    /// Wakes blocked waiters (new watermark).
    flushed_signal: Arc<Signal>,
    notifier: Notifier,
    /// Called after each flush that advanced the watermark (e.g. to wake a network thread).
    listeners: parking_lot::Mutex<Vec<FlushListener>>,
    mode: FlushDiskType,
    /// The group commit (SYNC_FLUSH), for flushes on a writer's own thread
    /// ([`FlushWatermark::flush_or_request`]). Weak: the group commit holds the watermark.
    group: OnceLock<Weak<GroupCommit>>,
}

/// A callback run on the flush thread after the watermark advanced; it must be quick.
pub type FlushListener = Box<dyn Fn() + Send + Sync>;

impl FlushWatermark {
    fn new(mode: FlushDiskType, start: i64) -> std::io::Result<Self> {
        Ok(FlushWatermark {
            flushed: AtomicI64::new(start),
            requested: AtomicI64::new(start),
            requests: std::sync::atomic::AtomicU64::new(0),
            request_signal: Signal::new(),
            flushed_signal: Signal::new(),
            notifier: Notifier::new()?,
            listeners: parking_lot::Mutex::new(Vec::new()),
            mode,
            group: OnceLock::new(),
        })
    }

    /// Everything below this offset is durable.
    pub fn flushed(&self) -> i64 {
        self.flushed.load(Ordering::Acquire)
    }

    /// The eventfd that becomes readable after each flush that advanced the watermark.
    pub fn notify_fd(&self) -> i32 {
        self.notifier.fd()
    }

    /// Run `listener` after every flush that advances the watermark.
    pub fn add_listener(&self, listener: FlushListener) {
        self.listeners.lock().push(listener);
    }

    /// Reset the eventfd (the event loop calls this when woken).
    pub fn drain_notifications(&self) -> u64 {
        self.notifier.drain()
    }

    /// Ask for `offset` to become durable (SYNC_FLUSH) without waiting.
    pub fn request(&self, offset: i64) {
        if self.flushed() >= offset {
            return;
        }
        self.requested.fetch_max(offset, Ordering::AcqRel);
        self.requests.fetch_add(1, Ordering::AcqRel);
        self.request_signal.notify();
    }

    /// Make `offset` durable (SYNC_FLUSH). With `inline` and no group commit in flight, the
    /// calling thread flushes everything appended so far itself, sparing the hand-off to a
    /// group-commit thread and back (two wake-ups, each a context switch); otherwise, or if
    /// that flush fails (the range is left for the group-commit threads to try again), the
    /// flush is requested as [`FlushWatermark::request`] does. Returns whether `offset` is
    /// durable on return.
    pub fn flush_or_request(&self, offset: i64, inline: bool) -> bool {
        if self.flushed() >= offset {
            return true;
        }
        if inline && self.mode == FlushDiskType::SyncFlush {
            if let Some(gc) = self.group.get().and_then(Weak::upgrade) {
                if let Some(job) = gc.take_if_idle() {
                    if gc.flush(job) && self.flushed() >= offset {
                        return true;
                    }
                }
            }
        }
        self.request(offset);
        self.flushed() >= offset
    }

    /// Request `offset` and block until it is durable or `timeout` passes.
    pub fn wait(&self, offset: i64, timeout: Duration) -> Result<()> {
        if self.flushed() >= offset {
            return Ok(());
        }
        if self.mode == FlushDiskType::SyncFlush {
            self.request(offset);
        }
        if self
            .flushed_signal
            .wait_until(timeout, || self.flushed() >= offset)
        {
            Ok(())
        } else {
            Err(StoreError::FlushTimeout(timeout.as_millis() as u64))
        }
    }

    fn publish(&self, offset: i64) {
        if offset > self.flushed.fetch_max(offset, Ordering::AcqRel) {
            self.flushed_signal.notify();
            self.notifier.notify();
            for listener in self.listeners.lock().iter() {
                listener();
            }
        }
    }
}

/// SYNC_FLUSH group commit, run by [`GROUP_COMMIT_DEPTH`] threads.
///
/// A thread takes everything appended so far that no other thread has taken (a range of
/// the CommitLog), `msync`s it and marks it done; the durable watermark moves over the
/// ranges done without a gap. While one thread waits for the disk, the writers it answers
/// next keep appending, and a second thread flushes their range at the same time instead
/// of after it: the disk sees two flushes in flight rather than one followed by a pause.
struct GroupCommit {
    log: Arc<CommitLog>,
    watermark: Arc<FlushWatermark>,
    after_flush: parking_lot::Mutex<Box<dyn Fn(i64) + Send>>,
    state: parking_lot::Mutex<PipeState>,
    /// Flush requests counted when the last range was taken.
    requests_at_issue: std::sync::atomic::AtomicU64,
    /// Newest store timestamp reported to `after_flush`.
    reported_ts: AtomicI64,
}

struct PipeState {
    /// End of the last range taken by a thread.
    issued: i64,
    /// Everything below is durable.
    durable: i64,
    /// Ranges flushed above `durable`: (from, to, newest store timestamp in them).
    done: Vec<(i64, i64, i64)>,
    /// Ranges whose flush failed, to be flushed again.
    retry: Vec<(i64, i64, i64)>,
}

impl GroupCommit {
    fn run(&self, ctx: &ServiceContext) {
        let mut failures = 0u32;
        loop {
            let seen = ctx.signal().generation();
            if self.has_work() {
                self.gather(ctx);
                if let Some(job) = self.take() {
                    if self.flush(job) {
                        failures = 0;
                    } else {
                        // Keep the watermark where it is: waiters time out with
                        // FLUSH_DISK_TIMEOUT rather than being told a lie.
                        failures += 1;
                        if ctx.stopped() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis((10 * failures as u64).min(1000)));
                    }
                }
                continue;
            }
            if ctx.stopped() {
                break;
            }
            ctx.wait(seen, Duration::from_millis(10));
        }
        // Final drain: everything appended up to now (or one more try of a failed range).
        if let Some(job) = self.take() {
            self.flush(job);
        }
    }

    /// A range failed and waits for another try, or a writer asked for more than is taken.
    fn has_work(&self) -> bool {
        let st = self.state.lock();
        !st.retry.is_empty() || self.watermark.requested.load(Ordering::Acquire) > st.issued
    }

    /// Several writers since the last range was taken: give the rest of them a moment to
    /// append, so that one flush covers them all. A lone writer is not delayed.
    fn gather(&self, ctx: &ServiceContext) {
        let w = &self.watermark;
        let requests = w.requests.load(Ordering::Acquire);
        if requests.saturating_sub(self.requests_at_issue.load(Ordering::Acquire)) <= 1 {
            return;
        }
        let mut want = w.requested.load(Ordering::Acquire);
        let started = Instant::now();
        while started.elapsed() < GATHER_MAX && !ctx.stopped() {
            // A plain sleep, not a wait on the signal: writers only signal an idle
            // flusher, so gathering costs them no wake-up syscall.
            std::thread::sleep(GATHER_STEP);
            let now = w.requested.load(Ordering::Acquire);
            if now == want {
                break;
            }
            want = now;
        }
    }

    /// Take a failed range again, or everything appended that no thread has taken.
    fn take(&self) -> Option<(i64, i64, i64)> {
        let mut st = self.state.lock();
        if let Some(job) = st.retry.pop() {
            return Some(job);
        }
        self.take_new(&mut st)
    }

    /// Everything appended that no thread has taken, only when no flush is in flight or
    /// waiting for another try (a writer flushing on its own thread never waits behind a
    /// group-commit thread's flush, nor runs beside one).
    fn take_if_idle(&self) -> Option<(i64, i64, i64)> {
        let mut st = self.state.lock();
        if !st.retry.is_empty() || !st.done.is_empty() || st.issued != st.durable {
            return None;
        }
        self.take_new(&mut st)
    }

    fn take_new(&self, st: &mut PipeState) -> Option<(i64, i64, i64)> {
        // The timestamp before the offset: the newest record below the offset is at least
        // this new, so the checkpoint never names a record that this flush did not cover.
        let ts = self.log.last_store_timestamp();
        let to = self.log.max_offset();
        if to <= st.issued {
            return None;
        }
        let from = st.issued;
        st.issued = to;
        self.requests_at_issue.store(
            self.watermark.requests.load(Ordering::Acquire),
            Ordering::Release,
        );
        Some((from, to, ts))
    }

    /// Flush one range; returns whether it reached the disk.
    fn flush(&self, job: (i64, i64, i64)) -> bool {
        let ok = self.log.sync_range(job.0 as u64, job.1 as u64).is_ok();
        let advanced = {
            let mut st = self.state.lock();
            if !ok {
                st.retry.push(job);
                return false;
            }
            st.done.push(job);
            let mut advanced = None;
            while let Some(i) = st.done.iter().position(|r| r.0 <= st.durable) {
                let (_, to, ts) = st.done.swap_remove(i);
                if to > st.durable {
                    st.durable = to;
                    advanced = Some((to, ts));
                }
            }
            advanced
        };
        if let Some((to, ts)) = advanced {
            self.log.queue().raise_flushed(to as u64);
            self.watermark.publish(to);
            if ts > self.reported_ts.fetch_max(ts, Ordering::AcqRel) {
                (self.after_flush.lock())(ts);
            }
        }
        true
    }
}

/// Settings of the flush service.
#[derive(Debug, Clone, Copy)]
pub struct FlushSettings {
    pub mode: FlushDiskType,
    pub interval: Duration,
    pub least_pages: u64,
    pub thorough_interval: Duration,
}

/// The running flush service.
pub struct FlushService {
    watermark: Arc<FlushWatermark>,
    services: Vec<Service>,
}

impl FlushService {
    /// Start flushing `log`. `after_flush` runs on the flush thread after each flush with
    /// the store timestamp of the newest flushed record (for the checkpoint).
    pub fn start(
        log: Arc<CommitLog>,
        settings: FlushSettings,
        after_flush: Box<dyn Fn(i64) + Send>,
    ) -> Result<FlushService> {
        let start = log
            .flushed_offset()
            .max(log.max_offset().min(log.flushed_offset()));
        let wm = Arc::new(
            FlushWatermark::new(settings.mode, start).map_err(|e| StoreError::io("eventfd", e))?,
        );
        let w = wm.clone();
        let signal = wm.request_signal.clone();
        let services = match settings.mode {
            FlushDiskType::SyncFlush => {
                let gc = Arc::new(GroupCommit {
                    log,
                    watermark: w,
                    after_flush: parking_lot::Mutex::new(after_flush),
                    state: parking_lot::Mutex::new(PipeState {
                        issued: start,
                        durable: start,
                        done: Vec::new(),
                        retry: Vec::new(),
                    }),
                    requests_at_issue: std::sync::atomic::AtomicU64::new(0),
                    reported_ts: AtomicI64::new(0),
                });
                let _ = wm.group.set(Arc::downgrade(&gc));
                let mut services = Vec::with_capacity(GROUP_COMMIT_DEPTH);
                for i in 0..GROUP_COMMIT_DEPTH {
                    let gc = gc.clone();
                    let name = format!("rmq-group-commit-{i}");
                    services.push(
                        Service::spawn(&name, signal.clone(), move |ctx| gc.run(ctx))
                            .map_err(|e| StoreError::io("flush thread", e))?,
                    );
                }
                services
            }
            FlushDiskType::AsyncFlush => Service::spawn("rmq-flush", signal, move |ctx| {
                let mut last_thorough = Instant::now();
                while !ctx.stopped() {
                    let seen = ctx.signal().generation();
                    ctx.wait(seen, settings.interval);
                    let least = if last_thorough.elapsed() >= settings.thorough_interval {
                        last_thorough = Instant::now();
                        0
                    } else {
                        settings.least_pages
                    };
                    let ts = log.last_store_timestamp();
                    if let Ok(off) = log.flush(least) {
                        if off > w.flushed() {
                            w.publish(off);
                            after_flush(ts);
                        }
                    }
                }
                for _ in 0..3 {
                    let ts = log.last_store_timestamp();
                    if let Ok(off) = log.flush(0) {
                        w.publish(off);
                        after_flush(ts);
                        break;
                    }
                }
            })
            .map(|s| vec![s])
            .map_err(|e| StoreError::io("flush thread", e))?,
        };
        Ok(FlushService {
            watermark: wm,
            services,
        })
    }

    pub fn watermark(&self) -> &Arc<FlushWatermark> {
        &self.watermark
    }

    /// Stop after a final full flush.
    pub fn shutdown(&mut self) {
        // Each thread drains whatever is left before it exits.
        for mut s in self.services.drain(..) {
            s.shutdown();
        }
    }
}

impl Drop for FlushService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageRef;

    fn msg(body: &[u8]) -> MessageRef<'_> {
        MessageRef {
            topic: "T",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: b"",
        }
    }

    fn settings(mode: FlushDiskType) -> FlushSettings {
        FlushSettings {
            mode,
            interval: Duration::from_millis(20),
            least_pages: 4,
            thorough_interval: Duration::from_millis(100),
        }
    }

    #[test]
    fn group_commit_under_concurrent_writers() {
        let d = tempfile::tempdir().unwrap();
        let log = Arc::new(CommitLog::new(
            d.path(),
            1 << 20,
            "127.0.0.1:10911".parse().unwrap(),
            1 << 20,
            false,
        ));
        let flushes = Arc::new(AtomicI64::new(0));
        let f = flushes.clone();
        let mut svc = FlushService::start(
            log.clone(),
            settings(FlushDiskType::SyncFlush),
            Box::new(move |_| {
                f.fetch_add(1, Ordering::AcqRel);
            }),
        )
        .unwrap();
        let wm = svc.watermark().clone();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let log = log.clone();
                let wm = wm.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let r = log.put(&msg(&[7u8; 512])).unwrap();
                        wm.wait(r.end_offset(), Duration::from_secs(10)).unwrap();
                        assert!(wm.flushed() >= r.end_offset());
                        assert!(log.flushed_offset() >= r.end_offset());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = flushes.load(Ordering::Acquire);
        assert!((1..=1600).contains(&n), "flushes: {n}");
        assert!(wm.drain_notifications() >= 1);
        svc.shutdown();
    }

    #[test]
    fn flush_or_request_flushes_inline_when_idle_and_requests_otherwise() {
        let d = tempfile::tempdir().unwrap();
        let log = Arc::new(CommitLog::new(
            d.path(),
            1 << 20,
            "127.0.0.1:10911".parse().unwrap(),
            1 << 20,
            false,
        ));
        let mut svc = FlushService::start(
            log.clone(),
            settings(FlushDiskType::SyncFlush),
            Box::new(|_| {}),
        )
        .unwrap();
        let wm = svc.watermark().clone();
        for _ in 0..20 {
            let r = log.put(&msg(&[3u8; 300])).unwrap();
            // No group commit in flight: this thread flushed it, durable on return.
            assert!(wm.flush_or_request(r.end_offset(), true));
            assert!(log.flushed_offset() >= r.end_offset());
        }
        // Not inline: the group commit flushes it.
        let r = log.put(&msg(b"by the group commit")).unwrap();
        wm.flush_or_request(r.end_offset(), false);
        wm.wait(r.end_offset(), Duration::from_secs(10)).unwrap();
        assert!(log.flushed_offset() >= r.end_offset());
        // Already durable: nothing to do.
        assert!(wm.flush_or_request(r.end_offset(), true));
        svc.shutdown();
    }

    #[test]
    fn async_flush_reaches_everything_and_sync_wait_times_out_when_stopped() {
        let d = tempfile::tempdir().unwrap();
        let log = Arc::new(CommitLog::new(
            d.path(),
            1 << 20,
            "127.0.0.1:10911".parse().unwrap(),
            1 << 20,
            false,
        ));
        let mut svc = FlushService::start(
            log.clone(),
            settings(FlushDiskType::AsyncFlush),
            Box::new(|_| {}),
        )
        .unwrap();
        let r = log.put(&msg(b"small")).unwrap();
        // Fewer than 4 dirty pages: only the thorough flush covers it.
        svc.watermark()
            .wait(r.end_offset(), Duration::from_secs(5))
            .unwrap();
        svc.shutdown();
        let r2 = log.put(&msg(b"after stop")).unwrap();
        assert!(matches!(
            svc.watermark()
                .wait(r2.end_offset(), Duration::from_millis(50)),
            Err(StoreError::FlushTimeout(50))
        ));
    }
}
