//! The one service base of the store (RocketMQ's `ServiceThread`): a named thread with a
//! wake-up signal, a timed wait and a final drain when it is stopped; plus the eventfd
//! notifier through which services tell an event loop that something happened.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// A wake-up signal: a generation counter plus a condition variable. `notify` is cheap when
/// nobody waits (one atomic add and one load).
#[derive(Default)]
pub struct Signal {
    generation: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Signal {
    pub fn new() -> Arc<Signal> {
        Arc::new(Signal::default())
    }

    /// The current generation; pass it to [`Signal::wait`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Wake every waiter.
    pub fn notify(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if self.waiters.load(Ordering::Acquire) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Wait until the generation moves past `seen` or `timeout` passes.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        let mut g = self.lock.lock();
        self.waiters.fetch_add(1, Ordering::AcqRel);
        if self.generation.load(Ordering::Acquire) == seen {
            self.cv.wait_for(&mut g, timeout);
        }
        self.waiters.fetch_sub(1, Ordering::AcqRel);
    }

    /// Wait until `done()` holds or `timeout` passes; returns whether it holds.
    pub fn wait_until(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.generation();
            if done() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            self.wait(seen, deadline - now);
        }
    }
}

/// What a service body sees: whether it should stop, and a timed wait on its signal.
pub struct ServiceContext {
    stop: Arc<AtomicBool>,
    signal: Arc<Signal>,
}

impl ServiceContext {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
    /// Sleep until woken or `timeout` passes (returns at once when stopping).
    pub fn wait(&self, seen: u64, timeout: Duration) {
        if !self.stopped() {
            self.signal.wait(seen, timeout);
        }
    }
    pub fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }
}

/// A running service thread. Dropping it stops it.
pub struct Service {
    name: String,
    stop: Arc<AtomicBool>,
    signal: Arc<Signal>,
    handle: Option<JoinHandle<()>>,
}

impl Service {
    /// Start `body` on a thread named `name`. The body loops until `ctx.stopped()` and then
    /// does its final drain before returning.
    pub fn spawn<F>(name: &str, signal: Arc<Signal>, body: F) -> std::io::Result<Service>
    where
        F: FnOnce(&ServiceContext) + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = ServiceContext {
            stop: stop.clone(),
            signal: signal.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(&ctx))?;
        Ok(Service {
            name: name.to_string(),
            stop,
            signal,
            handle: Some(handle),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Wake the service without stopping it.
    pub fn wakeup(&self) {
        self.signal.notify();
    }

    /// Ask the service to stop and wait for its final drain.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.signal.notify();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// An eventfd a service writes to after it made progress; an event loop watches its file
/// descriptor (`loop.add_reader`) and reads it to reset it. One write per flush or per
/// dispatch round, not per message; none while the fd is readable already (nobody drained it
/// since the last write, e.g. no event loop watches it).
pub struct Notifier {
    fd: libc::c_int,
    /// A write is not drained yet: the fd is readable, another write would change nothing.
    pending: AtomicBool,
}

impl Notifier {
    pub fn new() -> std::io::Result<Notifier> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Notifier {
            fd,
            pending: AtomicBool::new(false),
        })
    }

    /// The file descriptor to watch for readability.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Make the fd readable. Whatever the caller published before is seen by a reader that
    /// drains and then looks: either this writes after the drain, or the drain takes `pending`
    /// from this call (the swaps pair up).
    pub fn notify(&self) {
        if self.pending.swap(true, Ordering::SeqCst) {
            return;
        }
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to our own eventfd. A full counter
        // (EAGAIN) means it is readable already, which is all we need.
        unsafe {
            libc::write(self.fd, (&one as *const u64).cast(), 8);
        }
    }

    /// Reset the fd (what the event loop does when woken). Returns the writes since the last
    /// drain (0 or 1: a notify writes only to an fd that is not readable yet).
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes into a valid u64 from our own non-blocking eventfd.
        let n = unsafe { libc::read(self.fd, (&mut v as *mut u64).cast(), 8) };
        // Read first, then clear `pending`: cleared first, a notify in between would write
        // again, that write would be read here, and `pending` would stay set with the fd
        // unreadable, so every later notify would be skipped and the loop never woken again.
        // In this order a notify that finds `pending` set until the swap published before
        // it, and the caller looks at the offsets after this returns.
        self.pending.swap(false, Ordering::SeqCst);
        if n == 8 {
            v
        } else {
            0
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // SAFETY: closing the fd we own, once.
        unsafe {
            libc::close(self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_wakes_and_drains() {
        let sig = Signal::new();
        let count = Arc::new(AtomicU64::new(0));
        let c = count.clone();
        let mut svc = Service::spawn("t", sig.clone(), move |ctx| {
            while !ctx.stopped() {
                let g = ctx.signal().generation();
                c.fetch_add(1, Ordering::AcqRel);
                ctx.wait(g, Duration::from_secs(10));
            }
            c.fetch_add(1000, Ordering::AcqRel);
        })
        .unwrap();
        svc.wakeup();
        assert!(
            sig.wait_until(Duration::from_secs(5), || count.load(Ordering::Acquire)
                >= 1)
        );
        svc.shutdown();
        assert!(count.load(Ordering::Acquire) >= 1000);
    }

    #[test]
    fn notifier_is_readable_after_notify() {
        let n = Notifier::new().unwrap();
        assert_eq!(n.drain(), 0);
        n.notify();
        n.notify();
        // The second notify found the fd readable already: no second write.
        assert_eq!(n.drain(), 1);
        assert_eq!(n.drain(), 0);
        // Drained: the next notify writes again.
        n.notify();
        assert_eq!(n.drain(), 1);
    }
}
