//! The broker's network thread: accepts connections, reads and writes their sockets with mio
//! (edge-triggered epoll), answers the SEND fast path itself and hands every other frame to
//! the owner (the Python event loop) as [`Event`]s.
//!
//! Ownership of a connection is split: this thread reads it and frames its bytes; writes come
//! from this thread (fast-path answers, released SYNC_FLUSH answers) and from the owner
//! ([`Server::write`]), both through the connection's output buffer under its lock, so a
//! response is written by whichever thread produced it without a hand-off.
//!
//! Order: once a send of a connection went to the owner, later sends of that connection also
//! go to the owner until it has processed them ([`Server::ack`]), so the fast path never
//! overtakes a send the owner is still handling and a connection's messages are stored in the
//! order they came. Other requests the owner handles (a oneway END_TRANSACTION, a heartbeat, a
//! pull) do not hold sends back: RocketMQ's broker handles them on other threads than sends,
//! in no order with them.
//!
//! The owner watches [`Server::event_fd`] (readable when events are waiting), calls
//! [`Server::take_events`], handles them in order, then [`Server::ack`].

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::{Mutex, RwLock};
use rmq_store::service::Notifier;

use crate::batch::{send_some, SendBatch};
use crate::frame;
use crate::held::{Replies, Waiters};
use crate::long_poll::HeldPulls;
use crate::send::{may_be_send, FastSend, Sent};
use crate::stats::Decline;
use crate::tls::{self, TlsMode, TlsServer, HANDSHAKE_RECORD};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// The store's dispatch notifier (held pulls); connection tokens count up from 2.
const DISPATCH: Token = Token(usize::MAX - 1);
/// Initial read buffer of a connection; it grows (doubling) for larger frames or bursts.
const READ_BUF: usize = 64 * 1024;

/// Settings of the network thread.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Largest frame accepted, length prefix included; a larger one closes the connection.
    pub max_frame: usize,
    /// Stop reading a connection whose unsent output exceeds this many bytes...
    pub high_water: usize,
    /// ...and read it again once the output is below this.
    pub low_water: usize,
    /// How long a SYNC_FLUSH answer waits for its flush before FLUSH_DISK_TIMEOUT.
    pub flush_timeout: Duration,
    /// TLS (`tls.server.mode` permissive or enforcing); None: plain TCP only.
    pub tls: Option<TlsServer>,
    /// How long the thread polls for readiness before it sleeps, while traffic is steady
    /// ([`spins`]); zero: it sleeps at once.
    pub spin: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_frame: 16 * 1024 * 1024,
            high_water: 16 * 1024 * 1024,
            low_water: 4 * 1024 * 1024,
            flush_timeout: Duration::from_secs(5),
            tls: None,
            spin: Duration::from_micros(DEFAULT_SPIN_US),
        }
    }
}

/// Default of [`ServerOptions::spin`], in µs.
pub const DEFAULT_SPIN_US: u64 = 50;

/// Whether the network thread polls for up to `spin_ns` before it sleeps in a wait for
/// readiness. A sleeping thread costs whoever wakes it: the kernel's wake-up, and on a virtual
/// machine whose idle CPU halts, an interrupt through the hypervisor; a peer that answers within
/// microseconds (a producer with one send in flight, a batch of connections) pays it on every
/// request. So the thread spins only while traffic is steady: the last wait took under twice the
/// spin; and not while it holds answers for a flush, which the disk answers in its own time.
/// A wait that must return at once (`timeout` zero) has nothing to spin for.
fn spins(spin_ns: u64, last_wait_ns: u64, holds_none: bool, timeout: Option<Duration>) -> bool {
    spin_ns > 0 && holds_none && last_wait_ns < 2 * spin_ns && timeout != Some(Duration::ZERO)
}

/// What the owner hears about its connections, in order per connection.
#[derive(Debug)]
pub enum Event {
    Open {
        conn: u64,
        peer: SocketAddr,
        local: SocketAddr,
    },
    /// One or more whole frames (length prefixes included) for the owner to handle.
    Data {
        conn: u64,
        frames: Vec<u8>,
        /// CLOCK_MONOTONIC ns when the thread read them (for the owner to tell how long they
        /// waited before it handled them: RocketMQ's `waitTimeMillsInSendQueue`).
        read_ns: u64,
        /// Whether they hold a send (or a frame that may be one): the connection's later sends
        /// wait for [`Server::ack`].
        sends: bool,
    },
    Closed {
        conn: u64,
    },
    /// The connection was refused by TLS (plaintext under `enforcing`, a failed handshake); a
    /// Closed event follows.
    Refused {
        conn: u64,
        peer: SocketAddr,
        reason: String,
    },
}

struct Output {
    buf: Vec<u8>,
    closed: bool,
    /// The poller watches the socket for writability (only while output is buffered: a
    /// connection always watched for it would wake the thread on every ACK).
    watching_writable: bool,
    /// The TLS session: what is written is encrypted here, under this lock, in order.
    tls: Option<Box<rustls::ServerConnection>>,
}

impl Output {
    /// Write `data` now as far as the socket takes it (nothing may overtake buffered output);
    /// buffer the rest.
    fn push_raw(&mut self, fd: i32, data: &[u8]) {
        let n = if self.buf.is_empty() {
            send_some(fd, data)
        } else {
            0
        };
        self.buf.extend_from_slice(&data[n..]);
    }

    /// Whether the poller must start watching the socket for writability: output is left
    /// buffered and nobody watches yet (from now on somebody does).
    fn start_watching(&mut self) -> bool {
        if self.buf.is_empty() || self.watching_writable {
            return false;
        }
        self.watching_writable = true;
        true
    }
}

struct Conn {
    stream: TcpStream,
    out: Mutex<Output>,
    /// Data events holding a send (or a frame that may be one) handed to the owner and not yet
    /// acknowledged: while there are any, this connection's sends go to the owner too, behind
    /// them, so that its sends are stored in the order they came (other requests, such as a
    /// oneway END_TRANSACTION or a heartbeat, do not hold the next send back: RocketMQ handles
    /// them on other threads than its sends, in no order with them).
    owner_sends: AtomicU32,
    /// CLOCK_MONOTONIC nanoseconds of the last bytes received.
    last_seen_ns: AtomicU64,
}

impl Conn {
    /// Write `data` now as far as the socket takes it; buffer the rest, to be sent once the
    /// socket is writable again.
    fn send(&self, parts: &[&[u8]]) -> Written {
        let mut out = self.out.lock();
        if out.closed {
            return Written::Closed;
        }
        let fd = self.fd();
        if let Some(session) = out.tls.as_mut() {
            let mut cipher = Vec::new();
            tls::encrypt(session, parts, &mut cipher);
            out.push_raw(fd, &cipher);
        } else {
            for data in parts {
                out.push_raw(fd, data);
            }
        }
        if out.start_watching() {
            Written::WatchWritable
        } else {
            Written::Done
        }
    }

    /// Write buffered output; returns the bytes still buffered and whether the socket no longer
    /// needs watching for writability.
    fn flush(&self) -> (usize, bool) {
        let mut out = self.out.lock();
        if !out.buf.is_empty() {
            let n = send_some(self.fd(), &out.buf);
            out.buf.drain(..n);
        }
        let unwatch = out.buf.is_empty() && out.watching_writable;
        if unwatch {
            out.watching_writable = false;
        }
        (out.buf.len(), unwatch)
    }

    fn fd(&self) -> i32 {
        self.stream.as_raw_fd()
    }

    /// Start a TLS session on this connection.
    fn start_tls(&self, session: rustls::ServerConnection) {
        self.out.lock().tls = Some(Box::new(session));
    }

    /// Decrypt received ciphertext into `plain` and send what the session answers (handshake
    /// messages; an alert on failure). Ok: whether the peer closed the session, and whether the
    /// socket must be watched for writability.
    fn tls_input(&self, cipher: &[u8], plain: &mut Vec<u8>) -> (Result<bool, String>, bool) {
        let mut out = self.out.lock();
        let fd = self.fd();
        let Some(session) = out.tls.as_mut() else {
            return (Err("no TLS session".into()), false);
        };
        let result = tls::decrypt(session, cipher, plain);
        let mut answer = Vec::new();
        tls::pending(session, &mut answer);
        if !out.closed && !answer.is_empty() {
            out.push_raw(fd, &answer);
        }
        let watch = out.start_watching();
        (result, watch)
    }

    fn buffered(&self) -> usize {
        self.out.lock().buf.len()
    }
}

/// What became of a write.
#[derive(PartialEq, Eq)]
enum Written {
    Done,
    /// Output is left buffered: the poller must watch the socket for writability.
    WatchWritable,
    Closed,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the valid timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC read once as both an [`Instant`] (a request's latency counts from it) and
/// nanoseconds (what the owner compares with its own `time.monotonic_ns()`): both are that
/// clock, so the ns are the `Instant`'s distance from a pair read together at the start.
struct Clock {
    base: Instant,
    base_ns: u64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            base_ns: monotonic_ns(),
            base: Instant::now(),
        }
    }

    fn now(&self) -> (Instant, u64) {
        let at = Instant::now();
        let ns = self.base_ns + at.saturating_duration_since(self.base).as_nanos() as u64;
        (at, ns)
    }
}

/// A request's wait in the broker is looked at again (RocketMQ's fast failure) after this many
/// frames of one read: the frames of one read are handled within microseconds of each other,
/// and the limit is 200 ms.
const BUSY_CHECK_FRAMES: u32 = 16;

enum Command {
    Close(u64),
    Abort(u64),
    WatchWritable(u64),
}

struct Shared {
    conns: RwLock<HashMap<u64, Arc<Conn>>>,
    events: Mutex<Vec<Event>>,
    /// The connections of the Data events holding a send in the last `take_events`, released
    /// by `ack`.
    taken: Mutex<Vec<u64>>,
    notifier: Notifier,
    waker: Waker,
    commands: Mutex<Vec<Command>>,
    stop: AtomicBool,
    fast: RwLock<Option<Arc<FastSend>>>,
    opts: ServerOptions,
    /// The network thread is flushing on its own (`Worker::flush_held`): a flush needs not
    /// wake it, it looks at the durable offset right after.
    flushing_inline: AtomicBool,
    /// Times the network thread woke up with work (events to handle) since it started.
    wakeups: AtomicU64,
    /// Time (ns) the network thread spent polling instead of sleeping ([`spins`]).
    spun_ns: AtomicU64,
}

impl Shared {
    fn conn(&self, id: u64) -> Option<Arc<Conn>> {
        self.conns.read().get(&id).cloned()
    }

    fn command(&self, c: Command) {
        self.commands.lock().push(c);
        let _ = self.waker.wake();
    }
}

/// The listening network thread.
pub struct Server {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Server {
    /// Bind `host:port` (port 0: any free port) and start the network thread.
    pub fn bind(host: &str, port: u16, opts: ServerOptions) -> io::Result<Server> {
        let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot resolve {host}"),
            )
        })?;
        let std_listener = std::net::TcpListener::bind(addr)?;
        std_listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(std_listener);
        let local_addr = listener.local_addr()?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let shared = Arc::new(Shared {
            conns: RwLock::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            taken: Mutex::new(Vec::new()),
            notifier: Notifier::new()?,
            waker,
            commands: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            fast: RwLock::new(None),
            opts,
            flushing_inline: AtomicBool::new(false),
            wakeups: AtomicU64::new(0),
            spun_ns: AtomicU64::new(0),
        });
        let worker = Worker {
            shared: shared.clone(),
            poll,
            listener,
            local: HashMap::new(),
            held: Waiters::default(),
            hold_end: None,
            last_holder: (0, 0),
            shared_until_ns: 0,
            next_id: 2,
            seed: (monotonic_ns() as u32) | 1,
            clock: Clock::new(),
            owner_events: Vec::new(),
            replying: Vec::new(),
            sender: SendBatch::new(),
            pulls: HeldPulls::default(),
            dispatch_fd: None,
            check_pulls: false,
            last_wait_ns: 0,
        };
        let thread = std::thread::Builder::new()
            .name("rmq-net".into())
            .spawn(move || worker.run())?;
        Ok(Server {
            shared,
            local_addr,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Readable when events are waiting for [`Server::take_events`].
    pub fn event_fd(&self) -> i32 {
        self.shared.notifier.fd()
    }

    /// Install (or remove) the SEND fast path; SYNC_FLUSH answers are released on its
    /// store's flushes.
    pub fn set_fast_send(&self, fast: Option<Arc<FastSend>>) {
        if let Some(f) = &fast {
            let weak = Arc::downgrade(&self.shared);
            f.store().on_flush(Box::new(move || {
                if let Some(s) = weak.upgrade() {
                    // Pairs with the fence in `Worker::flush_held`: either the network thread
                    // sees this flush once its own is done, or this sees it no longer flushing.
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if !s.flushing_inline.load(Ordering::SeqCst) {
                        let _ = s.waker.wake();
                    }
                }
            }));
        }
        *self.shared.fast.write() = fast;
    }

    pub fn fast_send(&self) -> Option<Arc<FastSend>> {
        self.shared.fast.read().clone()
    }

    /// SYNC_MASTER: a slave acknowledged the CommitLog up to `offset`; the answers it covers
    /// are released (one call per ack report: a group commit, like the flush's).
    pub fn set_replicated(&self, offset: i64) {
        if let Some(r) = self
            .shared
            .fast
            .read()
            .as_ref()
            .and_then(|f| f.replication())
        {
            r.set_acked(offset);
            let _ = self.shared.waker.wake();
        }
    }

    /// The waiting events, oldest first. Call [`Server::ack`] once they are handled.
    pub fn take_events(&self) -> Vec<Event> {
        self.shared.notifier.drain();
        let events = std::mem::take(&mut *self.shared.events.lock());
        let mut taken = self.shared.taken.lock();
        for e in &events {
            if let Event::Data {
                conn, sends: true, ..
            } = e
            {
                taken.push(*conn);
            }
        }
        events
    }

    /// The events of the last [`Server::take_events`] are handled: their connections may use
    /// the fast path again.
    pub fn ack(&self) {
        let taken = std::mem::take(&mut *self.shared.taken.lock());
        if taken.is_empty() {
            return;
        }
        let conns = self.shared.conns.read();
        for id in taken {
            if let Some(c) = conns.get(&id) {
                c.owner_sends.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Write to a connection (returns false if it is closed).
    pub fn write(&self, conn: u64, parts: &[&[u8]]) -> bool {
        let Some(c) = self.shared.conn(conn) else {
            return false;
        };
        match c.send(parts) {
            Written::Done => true,
            Written::WatchWritable => {
                self.shared.command(Command::WatchWritable(conn));
                true
            }
            Written::Closed => false,
        }
    }

    /// Close after the buffered output is written.
    pub fn close(&self, conn: u64) {
        self.shared.command(Command::Close(conn));
    }

    /// Close now, dropping buffered output.
    pub fn abort(&self, conn: u64) {
        self.shared.command(Command::Abort(conn));
    }

    /// Unsent output of a connection, in bytes.
    pub fn write_buffer_size(&self, conn: u64) -> usize {
        self.shared.conn(conn).map(|c| c.buffered()).unwrap_or(0)
    }

    /// CLOCK_MONOTONIC seconds of the last bytes received on `conn`.
    pub fn last_seen(&self, conn: u64) -> Option<f64> {
        self.shared
            .conn(conn)
            .map(|c| c.last_seen_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }

    /// Times the network thread woke up with events to handle: with the requests it answered,
    /// how many requests share a wake-up (each costs a sleep, a wake-up and the system calls
    /// of one round).
    pub fn wakeups(&self) -> u64 {
        self.shared.wakeups.load(Ordering::Relaxed)
    }

    /// Time the network thread spent polling for requests instead of sleeping
    /// ([`ServerOptions::spin`]): idle time that counts as the process's CPU time.
    pub fn spun(&self) -> Duration {
        Duration::from_nanos(self.shared.spun_ns.load(Ordering::Relaxed))
    }

    /// Number of open connections.
    pub fn connections(&self) -> usize {
        self.shared.conns.read().len()
    }

    /// Close every connection and stop the thread (the owner then gets their Closed events).
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Local {
    conn: Arc<Conn>,
    peer: SocketAddr,
    /// Read buffer: `rbuf[..rlen]` holds received bytes not yet framed. Its length is its
    /// capacity (zeroed once when it grows), so reads never re-initialise memory.
    rbuf: Vec<u8>,
    rlen: usize,
    /// Fast-path answers produced in this poll round, written once the round's events are
    /// all handled (see [`Worker::write_replies`]).
    replies: Vec<u8>,
    paused: bool,
    closing: bool,
    /// TLS is on and this connection's first byte is not seen yet.
    sniff: bool,
    /// This connection has a TLS session: what is read is ciphertext.
    tls: bool,
}

/// Released held answers go to their connection's answers of this round.
struct RoundReplies<'a> {
    local: &'a mut HashMap<u64, Local>,
    replying: &'a mut Vec<u64>,
}

impl Replies for RoundReplies<'_> {
    fn buffer(&mut self, conn: u64) -> Option<&mut Vec<u8>> {
        let l = self.local.get_mut(&conn)?;
        if l.replies.is_empty() {
            self.replying.push(conn);
        }
        Some(&mut l.replies)
    }
}

struct Worker {
    shared: Arc<Shared>,
    poll: Poll,
    listener: TcpListener,
    local: HashMap<u64, Local>,
    held: Waiters,
    /// End of the answers held in this poll round, to be made durable once the round's
    /// requests are all appended ([`Worker::flush_held`]).
    hold_end: Option<i64>,
    /// The connection of the last held answer and when (CLOCK_MONOTONIC ns)...
    last_holder: (u64, u64),
    /// ...and until when several connections count as waiting for flushes (see
    /// [`Worker::flush_held`]).
    shared_until_ns: u64,
    next_id: u64,
    seed: u32,
    /// Reads CLOCK_MONOTONIC as an `Instant` and as ns in one clock read.
    clock: Clock,
    owner_events: Vec<Event>,
    /// Connections with answers in [`Local::replies`].
    replying: Vec<u64>,
    sender: SendBatch,
    /// Pulls held for long polling ([`crate::long_poll`]).
    pulls: HeldPulls,
    /// The dispatch notifier registered with the poll, once a pull was held.
    dispatch_fd: Option<i32>,
    /// Look at the held pulls at the end of this round (a dispatch, a new hold).
    check_pulls: bool,
    /// How long the last wait for readiness took (ns), spin included.
    last_wait_ns: u64,
}

/// Held answers of two connections this close together (ns) mean several connections wait
/// for flushes: for this long after, the network thread leaves every flush to the group
/// commit ([`Worker::flush_held`]).
const SHARED_FLUSH_NS: u64 = 5_000_000;

/// Watch the store's dispatch notifier `fd` (held pulls) instead of `old`; the fd watched.
fn watch_dispatch(poll: &Poll, old: Option<i32>, fd: i32) -> Option<i32> {
    let registry = poll.registry();
    if let Some(old) = old {
        let _ = registry.deregister(&mut SourceFd(&old));
    }
    registry
        .register(&mut SourceFd(&fd), DISPATCH, Interest::READABLE)
        .ok()
        .map(|()| fd)
}

/// Answers buffered for one connection beyond this are written at once rather than at the end
/// of the poll round.
const REPLY_BATCH: usize = 64 * 1024;

enum ReadOutcome {
    Open,
    Close,
}

impl Worker {
    fn run(mut self) {
        let mut events = Events::with_capacity(512);
        loop {
            let deadline = match (self.held.next_deadline(), self.pulls.next_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if let Err(e) = self.wait(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
            if self.shared.stop.load(Ordering::Acquire) {
                break;
            }
            if !events.is_empty() {
                self.shared.wakeups.fetch_add(1, Ordering::Relaxed);
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    DISPATCH => self.check_pulls = true,
                    Token(t) => {
                        let id = t as u64;
                        // A peer that reset the connection (e.g. closed it with our answers
                        // unread) leaves what it sent before readable: frame it before closing,
                        // as a clean end of stream does.
                        let error = ev.is_error();
                        let mut close = false;
                        if !error && ev.is_writable() {
                            close = self.on_writable(id);
                        }
                        if !close && (error || ev.is_readable() || ev.is_read_closed()) {
                            close = matches!(
                                self.on_readable(id, error || ev.is_read_closed()),
                                ReadOutcome::Close
                            );
                        }
                        if error || close {
                            self.close(id);
                        }
                    }
                }
            }
            // Stored sends are written before anything is answered or flushed.
            if !self.write_deferred() {
                self.withhold_replies();
            }
            self.write_replies();
            self.flush_held();
            self.commands();
            self.release_held();
            self.wake_pulls();
            self.write_replies();
            self.publish();
        }
        self.pulls.clear();
        let ids: Vec<u64> = self.local.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
        self.publish();
    }

    /// Wait for readiness, first polling without sleeping when [`spins`] says so.
    fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        let start = monotonic_ns();
        let spin_ns = self.shared.opts.spin.as_nanos() as u64;
        let mut timeout = timeout;
        if spins(spin_ns, self.last_wait_ns, self.held.is_empty(), timeout) {
            // A deadline (a held answer, a held pull) sooner than the spin ends it.
            let until = start + timeout.map_or(spin_ns, |t| spin_ns.min(t.as_nanos() as u64));
            loop {
                self.poll.poll(events, Some(Duration::ZERO))?;
                let now = monotonic_ns();
                if !events.is_empty() || now >= until {
                    self.shared
                        .spun_ns
                        .fetch_add(now - start, Ordering::Relaxed);
                    if !events.is_empty() {
                        self.last_wait_ns = now - start;
                        return Ok(());
                    }
                    let spun = Duration::from_nanos(now - start);
                    timeout = timeout.map(|t| t.saturating_sub(spun));
                    break;
                }
                // The store's threads share this CPU when the broker is pinned to one.
                std::thread::yield_now();
            }
        }
        self.poll.poll(events, timeout)?;
        self.last_wait_ns = monotonic_ns() - start;
        Ok(())
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let id = self.next_id;
                    self.next_id += 1;
                    let local_addr = stream.local_addr().unwrap_or(peer);
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, Token(id as usize), Interest::READABLE)
                        .is_err()
                    {
                        continue;
                    }
                    let conn = Arc::new(Conn {
                        stream,
                        out: Mutex::new(Output {
                            buf: Vec::new(),
                            closed: false,
                            watching_writable: false,
                            tls: None,
                        }),
                        owner_sends: AtomicU32::new(0),
                        last_seen_ns: AtomicU64::new(monotonic_ns()),
                    });
                    self.shared.conns.write().insert(id, conn.clone());
                    self.local.insert(
                        id,
                        Local {
                            conn,
                            peer,
                            rbuf: vec![0; READ_BUF],
                            rlen: 0,
                            replies: Vec::new(),
                            paused: false,
                            closing: false,
                            sniff: self.shared.opts.tls.is_some(),
                            tls: false,
                        },
                    );
                    self.owner_events.push(Event::Open {
                        conn: id,
                        peer,
                        local: local_addr,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors and the like: try again on the next readiness.
                Err(_) => break,
            }
        }
    }

    /// Returns true when the connection should close.
    fn on_writable(&mut self, id: u64) -> bool {
        let Some(l) = self.local.get_mut(&id) else {
            return false;
        };
        let (left, unwatch) = l.conn.flush();
        if unwatch {
            let conn = l.conn.clone();
            self.interest(id, &conn, Interest::READABLE);
        }
        let Some(l) = self.local.get_mut(&id) else {
            return false;
        };
        if l.closing && left == 0 {
            return true;
        }
        if l.paused && left < self.shared.opts.low_water {
            l.paused = false;
            return matches!(self.on_readable(id, true), ReadOutcome::Close);
        }
        false
    }

    /// Read and frame what arrived. `peer_closed`: the event said the peer shut down its side,
    /// so read until EOF even after a short read (no further edge would come).
    fn on_readable(&mut self, id: u64, peer_closed: bool) -> ReadOutcome {
        let fast = self.shared.fast.read().clone();
        let max_frame = self.shared.opts.max_frame;
        let high_water = self.shared.opts.high_water;
        let Some(l) = self.local.get_mut(&id) else {
            return ReadOutcome::Open;
        };
        if l.closing {
            // Draining output only; discard input.
            let mut sink = [0u8; 4096];
            loop {
                match (&l.conn.stream).read(&mut sink) {
                    Ok(0) => return ReadOutcome::Close,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Open,
                    Err(_) => return ReadOutcome::Close,
                }
            }
        }
        let mut to_owner: Vec<u8> = Vec::new();
        let had_replies = !l.replies.is_empty();
        let mut withheld = false;
        let mut outcome = ReadOutcome::Open;
        let mut watch_writable = false;
        while !l.paused {
            if l.rlen == l.rbuf.len() {
                let grown = l.rbuf.len() * 2;
                l.rbuf.resize(grown, 0);
            }
            let n = match (&l.conn.stream).read(&mut l.rbuf[l.rlen..]) {
                Ok(0) => {
                    outcome = ReadOutcome::Close;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    outcome = ReadOutcome::Close;
                    break;
                }
            };
            // A short read drained the socket: new data raises a new edge, no need to read
            // again just to hear EAGAIN.
            let drained = !peer_closed && l.rlen + n < l.rbuf.len();
            if l.sniff {
                l.sniff = false;
                let tls_opts = self
                    .shared
                    .opts
                    .tls
                    .as_ref()
                    .expect("sniffing means TLS is on");
                if l.rbuf[l.rlen] == HANDSHAKE_RECORD {
                    match tls_opts.session() {
                        Ok(session) => {
                            l.conn.start_tls(session);
                            l.tls = true;
                        }
                        Err(reason) => {
                            self.owner_events.push(Event::Refused {
                                conn: id,
                                peer: l.peer,
                                reason: format!("a TLS session that could not start: {reason}"),
                            });
                            return ReadOutcome::Close;
                        }
                    }
                } else if tls_opts.mode == TlsMode::Enforcing {
                    self.owner_events.push(Event::Refused {
                        conn: id,
                        peer: l.peer,
                        reason: "a plaintext connection (tls.server.mode=enforcing)".into(),
                    });
                    return ReadOutcome::Close;
                }
            }
            let n = if l.tls {
                let cipher = l.rbuf[l.rlen..l.rlen + n].to_vec();
                let mut plain = Vec::new();
                let (result, watch) = l.conn.tls_input(&cipher, &mut plain);
                watch_writable |= watch;
                match result {
                    Ok(closed) => {
                        if closed {
                            outcome = ReadOutcome::Close;
                        }
                    }
                    Err(reason) => {
                        self.owner_events.push(Event::Refused {
                            conn: id,
                            peer: l.peer,
                            reason: format!("a TLS connection that failed: {reason}"),
                        });
                        l.rlen = 0;
                        return ReadOutcome::Close;
                    }
                }
                while l.rlen + plain.len() > l.rbuf.len() {
                    let grown = l.rbuf.len() * 2;
                    l.rbuf.resize(grown, 0);
                }
                l.rbuf[l.rlen..l.rlen + plain.len()].copy_from_slice(&plain);
                plain.len()
            } else {
                n
            };
            l.rlen += n;
            let (read_at, read_ns) = self.clock.now();
            l.conn.last_seen_ns.store(read_ns, Ordering::Relaxed);
            let (mut busy_at, mut frames) = (read_at, 0u32);
            // Frame what we have.
            let mut pos = 0;
            let mut diverted = l.conn.owner_sends.load(Ordering::Acquire) > 0;
            let mut sends = false;
            loop {
                let total = match frame::next_frame_len(&l.rbuf[pos..l.rlen], max_frame) {
                    Ok(Some(t)) => t,
                    Ok(None) => break,
                    Err(_) => {
                        // Malformed stream: this connection only is closed.
                        l.rlen = 0;
                        return ReadOutcome::Close;
                    }
                };
                let f = &l.rbuf[pos..pos + total];
                pos += total;
                if !diverted {
                    if let Some(fs) = &fast {
                        let seed = &mut self.seed;
                        let mut random = || {
                            *seed ^= *seed << 13;
                            *seed ^= *seed >> 17;
                            *seed ^= *seed << 5;
                            *seed
                        };
                        // Too busy: left to the owner, which answers SYSTEM_BUSY as RocketMQ
                        // does (and every later send of this connection goes there, in order).
                        let busy = fs.fast_failure() && {
                            frames += 1;
                            if frames.is_multiple_of(BUSY_CHECK_FRAMES) {
                                busy_at = Instant::now();
                            }
                            fs.too_busy(
                                    busy_at.saturating_duration_since(read_at).as_nanos() as u64
                                )
                        };
                        if busy {
                            fs.note_declined(f, Decline::Busy);
                        }
                        let handled = if busy {
                            None
                        } else {
                            fs.handle_read_at(f, read_at, l.peer, &mut random, &mut l.replies)
                        };
                        match handled {
                            Some(Sent::Replied) | Some(Sent::NoReply) => continue,
                            Some(Sent::Pull(p)) => {
                                let fd = fs.dispatch_fd();
                                if self.dispatch_fd != Some(fd) {
                                    self.dispatch_fd =
                                        watch_dispatch(&self.poll, self.dispatch_fd, fd);
                                }
                                self.pulls.push(id, p, f.to_vec());
                                // A message dispatched since the pull looked is seen at the end
                                // of the round.
                                self.check_pulls = true;
                                continue;
                            }
                            Some(Sent::Hold(h)) => {
                                if h.flush {
                                    self.hold_end = self.hold_end.max(Some(h.end));
                                }
                                let now = monotonic_ns();
                                let (conn, at) = self.last_holder;
                                if conn != id && now.saturating_sub(at) < SHARED_FLUSH_NS {
                                    self.shared_until_ns = now + SHARED_FLUSH_NS;
                                }
                                self.last_holder = (id, now);
                                let flush = self.shared.opts.flush_timeout;
                                self.held.push(h, id, Instant::now(), fs, flush);
                                continue;
                            }
                            None => {}
                        }
                    }
                } else if let Some(fs) = &fast {
                    fs.note_declined(f, Decline::Queued);
                }
                // To the owner, in order; a send keeps this connection's later sends behind it.
                if fast.is_none() || may_be_send(f) {
                    diverted = true;
                    sends = true;
                }
                to_owner.extend_from_slice(f);
            }
            l.rbuf.copy_within(pos..l.rlen, 0);
            l.rlen -= pos;
            if l.replies.len() > REPLY_BATCH {
                if !fast.as_ref().is_none_or(|fs| fs.write_deferred()) {
                    // Not written: no answer leaves (see `withhold_replies`).
                    withheld = true;
                    l.replies.clear();
                    outcome = ReadOutcome::Close;
                    break;
                }
                if l.conn.send(&[&l.replies]) == Written::WatchWritable {
                    watch_writable = true;
                }
                l.replies.clear();
            }
            if !to_owner.is_empty() {
                if sends {
                    l.conn.owner_sends.fetch_add(1, Ordering::AcqRel);
                }
                self.owner_events.push(Event::Data {
                    conn: id,
                    frames: std::mem::take(&mut to_owner),
                    read_ns,
                    sends,
                });
            }
            if l.conn.buffered() > high_water {
                l.paused = true;
            }
            if drained {
                break;
            }
        }
        if l.rbuf.len() > 4 * READ_BUF && l.rlen <= READ_BUF {
            // A burst or a large frame grew it: give the memory back.
            l.rbuf.truncate(READ_BUF);
            l.rbuf.shrink_to_fit();
        }
        if !had_replies && !l.replies.is_empty() {
            self.replying.push(id);
        }
        if watch_writable {
            let conn = l.conn.clone();
            self.interest(id, &conn, Interest::READABLE | Interest::WRITABLE);
        }
        if withheld {
            self.note_withheld(1);
        }
        outcome
    }

    /// Answer the held pulls whose queue grew, whose time is over or whose connection is gone
    /// (those are dropped); a pull the fast path no longer answers goes to the owner.
    fn wake_pulls(&mut self) {
        if self.pulls.is_empty() {
            return;
        }
        let now = Instant::now();
        let due_time = self.pulls.next_deadline().is_some_and(|d| d <= now);
        if !std::mem::take(&mut self.check_pulls) && !due_time {
            return;
        }
        let Some(fs) = self.shared.fast.read().clone() else {
            self.pulls.clear();
            return;
        };
        // Drain first, then look: a dispatch after this drain notifies again.
        fs.drain_dispatched();
        let local = &self.local;
        let due = self.pulls.take_due(
            now,
            |topic, queue| fs.max_offset_in_queue(topic, queue),
            |conn| !local.contains_key(&conn),
        );
        for w in due {
            let Some(l) = self.local.get_mut(&w.conn) else {
                continue; // its connection is gone
            };
            let had = l.replies.len();
            if fs.pull_again(&w.pull, &mut l.replies).is_some() {
                if had == 0 {
                    self.replying.push(w.conn);
                }
            } else {
                self.owner_events.push(Event::Data {
                    conn: w.conn,
                    frames: w.frame,
                    read_ns: monotonic_ns(),
                    sends: false,
                });
            }
        }
    }

    /// Write the sends the fast path stored in this round ([`FastSend::write_deferred`]);
    /// false if that failed.
    fn write_deferred(&self) -> bool {
        self.shared
            .fast
            .read()
            .as_ref()
            .is_none_or(|fs| fs.write_deferred())
    }

    /// The round's sends could not be written (the disk failing): their answers would say
    /// SEND_OK of records not on disk, so none is sent. Every connection with answers in this
    /// round is closed instead: its client counts the sends failed and sends them again
    /// (RocketMQ clients retry, on another broker where there is one). The records stay
    /// kept back and are written by the next write that succeeds, so a resent message may be
    /// stored twice, never acknowledged and lost.
    fn withhold_replies(&mut self) {
        let mut ids = std::mem::take(&mut self.replying);
        ids.retain(|id| self.local.contains_key(id));
        self.note_withheld(ids.len());
        for id in ids {
            if let Some(l) = self.local.get_mut(&id) {
                l.replies.clear();
            }
            self.close(id);
        }
    }

    fn note_withheld(&self, connections: usize) {
        if connections == 0 {
            return;
        }
        if let Some(fs) = self.shared.fast.read().as_ref() {
            fs.store().journal().warn(
                "deferred-write",
                format!(
                    "sends not written to the CommitLog: {connections} connections closed \
                     without their answers, for their clients to send again"
                ),
            );
        }
    }

    /// Write the fast-path answers of this poll round, all in one system call where io_uring
    /// is there ([`SendBatch`]). Answering only after every ready connection is read, and
    /// together, keeps the woken clients from preempting this thread in the middle of a
    /// round: on two cores a woken client often lands on this thread's CPU.
    fn write_replies(&mut self) {
        let ids = std::mem::take(&mut self.replying);
        let mut batch: Vec<(u64, Arc<Conn>, Vec<u8>)> = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(l) = self.local.get_mut(&id) {
                if !l.replies.is_empty() {
                    batch.push((id, l.conn.clone(), std::mem::take(&mut l.replies)));
                }
            }
        }
        let mut watch: Vec<u64> = Vec::new();
        let mut abort: Vec<u64> = Vec::new();
        {
            // Hold every connection's output while its bytes are in flight, so no write of
            // the owner slips in between. A connection with output already buffered queues
            // behind it instead.
            let conns: Vec<Arc<Conn>> = batch.iter().map(|(_, c, _)| c.clone()).collect();
            let mut outs: Vec<_> = conns.iter().map(|c| c.out.lock()).collect();
            for (out, item) in outs.iter_mut().zip(batch.iter_mut()) {
                if let Some(session) = out.tls.as_mut() {
                    let mut cipher = Vec::with_capacity(item.2.len() + 64);
                    tls::encrypt(session, &[&item.2], &mut cipher);
                    item.2 = cipher;
                }
            }
            let mut items: Vec<(i32, &[u8])> = Vec::with_capacity(batch.len());
            let mut which: Vec<usize> = Vec::with_capacity(batch.len());
            for (i, out) in outs.iter().enumerate() {
                if !out.closed && out.buf.is_empty() {
                    items.push((batch[i].1.fd(), &batch[i].2));
                    which.push(i);
                }
            }
            let mut took: Vec<Option<usize>> = vec![Some(0); batch.len()];
            for (&i, &n) in which.iter().zip(self.sender.send_all(&items)) {
                took[i] = n;
            }
            for ((out, (id, _, data)), took) in outs.iter_mut().zip(&batch).zip(took) {
                if out.closed {
                    continue;
                }
                let Some(n) = took else {
                    abort.push(*id);
                    continue;
                };
                out.buf.extend_from_slice(&data[n..]);
                if out.start_watching() {
                    watch.push(*id);
                }
            }
        }
        for (id, _, mut data) in batch {
            // Give the buffer back for the next round (keeping a modest capacity).
            if let Some(l) = self.local.get_mut(&id) {
                data.clear();
                if data.capacity() <= 4 * REPLY_BATCH {
                    l.replies = data;
                }
            }
        }
        for id in watch {
            if let Some(conn) = self.local.get(&id).map(|l| l.conn.clone()) {
                self.interest(id, &conn, Interest::READABLE | Interest::WRITABLE);
            }
        }
        for id in abort {
            self.close(id);
        }
    }

    /// Change what the poller watches on a connection.
    fn interest(&mut self, id: u64, conn: &Conn, interest: Interest) {
        let fd = conn.fd();
        let _ = self
            .poll
            .registry()
            .reregister(&mut SourceFd(&fd), Token(id as usize), interest);
    }

    fn commands(&mut self) {
        let cmds = std::mem::take(&mut *self.shared.commands.lock());
        for c in cmds {
            match c {
                Command::Abort(id) => self.close(id),
                Command::Close(id) => {
                    if let Some(l) = self.local.get_mut(&id) {
                        if l.conn.flush().0 == 0 {
                            self.close(id);
                        } else {
                            l.closing = true;
                            let _ = l.conn.stream.shutdown(Shutdown::Read);
                        }
                    }
                }
                Command::WatchWritable(id) => {
                    if let Some(conn) = self.local.get(&id).map(|l| l.conn.clone()) {
                        self.interest(id, &conn, Interest::READABLE | Interest::WRITABLE);
                    }
                }
            }
        }
    }

    /// Make this round's held answers durable. One answer waiting, and no other connection
    /// waiting for flushes lately: flush here, as part of this round, rather than wake a
    /// group-commit thread and be woken by it (two context switches per send). Otherwise the
    /// group commit flushes and this thread reads on: while it flushed, the other
    /// connections' sends would wait unread, and the flushes of the group commit would no
    /// longer overlap the appends of the next ones.
    fn flush_held(&mut self) {
        let Some(end) = self.hold_end.take() else {
            return;
        };
        let Some(fast) = self.shared.fast.read().clone() else {
            return;
        };
        let inline = self.held.len() == 1 && monotonic_ns() >= self.shared_until_ns;
        self.shared.flushing_inline.store(inline, Ordering::SeqCst);
        fast.flush_held(end, inline);
        self.shared.flushing_inline.store(false, Ordering::SeqCst);
        // A group-commit flush that finished meanwhile did not wake this thread: the durable
        // offset `release_held` reads next includes it (see the listener in `set_fast_send`).
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let Some(fast) = self.shared.fast.read().clone() else {
            self.held.clear();
            return;
        };
        // Released answers leave with the round's other answers (`write_replies`).
        let mut out = RoundReplies {
            local: &mut self.local,
            replying: &mut self.replying,
        };
        let flush = self.shared.opts.flush_timeout;
        self.held.release(&fast, Instant::now(), flush, &mut out);
    }

    fn close(&mut self, id: u64) {
        let Some(l) = self.local.remove(&id) else {
            return;
        };
        self.shared.conns.write().remove(&id);
        if !l.replies.is_empty() {
            // Answers of this round to a peer that has shut down its side: best effort, once
            // what they answer for is written.
            if self.write_deferred() {
                l.conn.send(&[&l.replies]);
            }
        }
        l.conn.out.lock().closed = true;
        let fd = l.conn.fd();
        let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        let _ = l.conn.stream.shutdown(Shutdown::Both);
        self.owner_events.push(Event::Closed { conn: id });
    }

    fn publish(&mut self) {
        if self.owner_events.is_empty() {
            return;
        }
        let mut q = self.shared.events.lock();
        let was_empty = q.is_empty();
        q.append(&mut self.owner_events);
        drop(q);
        if was_empty {
            self.shared.notifier.notify();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_only_while_traffic_is_steady_and_no_flush_is_awaited() {
        let spin = 50_000;
        let block = None;
        // Steady traffic: the last wait was short.
        assert!(spins(spin, 20_000, true, block));
        assert!(spins(spin, 99_999, true, Some(Duration::from_secs(15))));
        // Idle or slow traffic: sleep at once.
        assert!(!spins(spin, 100_000, true, block));
        assert!(!spins(spin, 3_000_000_000, true, block));
        // Answers wait for the disk: spinning would not bring the flush sooner.
        assert!(!spins(spin, 20_000, false, block));
        // A poll that returns at once, or spinning switched off.
        assert!(!spins(spin, 20_000, true, Some(Duration::ZERO)));
        assert!(!spins(0, 0, true, block));
    }
}
