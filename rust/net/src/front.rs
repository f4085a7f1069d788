//! A port that takes TLS and plaintext clients alike and hands each connection's plaintext to a
//! server on loopback: the gRPC endpoint's front. grpcio serves a port either in plain text or
//! over TLS, while RocketMQ's proxy serves both on one port (`tls.server.mode=permissive`, with a
//! self-signed certificate in its TLS test mode), and the official 5.x Java client connects over
//! TLS unless told otherwise.
//!
//! Each accepted connection is looked at as the network thread's permissive TLS does: a first
//! byte that opens a TLS handshake (0x16) gets a TLS session (ALPN as the [`TlsServer`] offers
//! it), anything else is served in plain text (refused in `enforcing` mode). Then a thread per
//! connection serves its HTTP/2 ([`crate::grpc::serve`]): every call is passed on over a new
//! HTTP/2 connection to the upstream server's abstract Unix socket (no TCP port for it on
//! loopback), but for the calls the front answers itself once its owner turns them on
//! ([`Front::fast_sends`]), until either side closes.
//!
//! Each upstream connection is bound to an abstract name of its own (`<upstream>.<n>`), which the
//! upstream server reports as its peer (`unix-abstract:<name>`): [`Front::peer_of`] names the
//! client behind it, for the addresses ACL white lists and client lists use.
//!
//! Refusals (a plaintext client in enforcing mode, a failed handshake, an upstream that does not
//! answer) are counted and kept, with the peer's address, for the owner to log.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::grpc::{self, routes::FastSends};
use crate::tls::{TlsMode, TlsServer, HANDSHAKE_RECORD};

/// How long a new connection may stay silent before its first byte decides TLS or not.
const SNIFF_TIMEOUT: Duration = Duration::from_secs(30);
/// Refusals kept for the owner between two [`Front::take_refusals`].
const KEPT_REFUSALS: usize = 256;

/// What the front has served since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrontStats {
    /// Connections served over TLS.
    pub tls: u64,
    /// Connections passed on in plain text.
    pub plain: u64,
    /// Connections refused or broken off by an error (see [`Front::take_refusals`]).
    pub refused: u64,
    /// Connections open now.
    pub open: u64,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    next: AtomicU64,
    /// Each open connection's client socket, shut down by [`Front::stop`].
    conns: Mutex<HashMap<u64, TcpStream>>,
    /// The client behind each upstream connection, by the connection's abstract name.
    peers: Mutex<HashMap<String, SocketAddr>>,
    tls: AtomicU64,
    plain: AtomicU64,
    refused: AtomicU64,
    refusals: Mutex<VecDeque<String>>,
    fast: Arc<FastSends>,
}

impl Shared {
    fn refuse(&self, why: String) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.refusals.lock();
        if kept.len() == KEPT_REFUSALS {
            kept.pop_front();
        }
        kept.push_back(why);
    }
}

/// The listening front: a thread accepting connections, one thread per connection.
pub struct Front {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Front {
    /// Listen on `host:port` (0: any free port) and pass every connection on to the server
    /// listening on the abstract Unix socket `upstream` (its name, without the leading NUL).
    pub fn start(host: &str, port: u16, upstream: &str, tls: TlsServer) -> io::Result<Front> {
        if upstream.is_empty() || upstream.len() > 80 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the upstream's abstract name must have 1 to 80 bytes",
            ));
        }
        let upstream = upstream.to_string();
        let addr = (host, port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address"))?;
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let tls = tls.with_alpn(&[b"h2"]);
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rmq-grpc-front".into())
            .spawn(move || accept_loop(listener, upstream, tls, s))?;
        Ok(Front {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> FrontStats {
        let s = &self.shared;
        FrontStats {
            tls: s.tls.load(Ordering::Relaxed),
            plain: s.plain.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            open: s.conns.lock().len() as u64,
        }
    }

    /// The refusals since the last call, oldest first (at most the last 256), each naming the
    /// peer and the cause.
    pub fn take_refusals(&self) -> Vec<String> {
        self.shared.refusals.lock().drain(..).collect()
    }

    /// The client whose bytes the front passes on through its upstream connection bound to the
    /// abstract name `name` (`None`: no such connection now).
    pub fn peer_of(&self, name: &str) -> Option<SocketAddr> {
        self.shared.peers.lock().get(name).copied()
    }

    /// The sends the port serves itself (off until the owner turns them on).
    pub fn fast_sends(&self) -> Arc<FastSends> {
        self.shared.fast.clone()
    }

    /// Stop listening and close every connection.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for conn in self.shared.conns.lock().values() {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, upstream: String, tls: TlsServer, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((client, peer)) => {
                let id = shared.next.fetch_add(1, Ordering::Relaxed);
                let Ok(kept) = client.try_clone() else {
                    shared.refuse(format!("{peer}: cannot keep the connection"));
                    continue;
                };
                shared.conns.lock().insert(id, kept);
                let (tls, s, upstream) = (tls.clone(), shared.clone(), upstream.clone());
                let spawned = std::thread::Builder::new()
                    .name("rmq-grpc-front-conn".into())
                    .spawn(move || {
                        let name = format!("{upstream}.{id}");
                        if let Err(why) = serve(client, peer, &upstream, &name, &tls, &s) {
                            s.refuse(format!("{peer}: {why}"));
                        }
                        s.conns.lock().remove(&id);
                    });
                if let Err(e) = spawned {
                    shared.conns.lock().remove(&id);
                    shared.refuse(format!("{peer}: no thread for the connection: {e}"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait(&[(listener.as_raw_fd(), libc::POLLIN)], 200);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // Out of descriptors and the like: the connection waits in the backlog.
                shared.refuse(format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// poll(2) on `fds` for up to `timeout_ms` (-1: no limit); the events seen, per fd.
fn wait(fds: &[(i32, i16)], timeout_ms: i32) -> Vec<i16> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: `polled` is a valid array of `polled.len()` pollfd structures.
    let n = unsafe {
        libc::poll(
            polled.as_mut_ptr(),
            polled.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if n < 0 {
        return vec![0; fds.len()];
    }
    polled.iter().map(|p| p.revents).collect()
}

fn serve(
    client: TcpStream,
    peer: SocketAddr,
    upstream: &str,
    name: &str,
    tls: &TlsServer,
    shared: &Shared,
) -> Result<(), String> {
    let _ = client.set_nodelay(true);
    client
        .set_read_timeout(Some(SNIFF_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut first = [0u8; 1];
    let n = loop {
        match client.peek(&mut first) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut =>
            {
                return Err(format!("sent nothing in {} s", SNIFF_TIMEOUT.as_secs()))
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    if n == 0 {
        return Ok(()); // closed before a byte: nothing to serve
    }
    let secure = first[0] == HANDSHAKE_RECORD;
    if !secure && tls.mode == TlsMode::Enforcing {
        return Err("a plaintext connection refused (tls.server.mode=enforcing)".into());
    }
    let up = connect_abstract(name, upstream)
        .map_err(|e| format!("the gRPC server at @{upstream} does not answer: {e}"))?;
    client
        .set_read_timeout(None)
        .and_then(|()| client.set_nonblocking(true))
        .and_then(|()| up.set_nonblocking(true))
        .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("no runtime for the connection: {e}"))?;
    shared.peers.lock().insert(name.to_string(), peer);
    let fast = shared.fast.clone();
    let result = runtime.block_on(async {
        let client = tokio::net::TcpStream::from_std(client).map_err(|e| e.to_string())?;
        let up = tokio::net::UnixStream::from_std(up).map_err(|e| e.to_string())?;
        let peer = peer.to_string();
        if secure {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
            let stream = acceptor
                .accept(client)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            shared.tls.fetch_add(1, Ordering::Relaxed);
            grpc::serve(stream, up, peer, fast).await
        } else {
            shared.plain.fetch_add(1, Ordering::Relaxed);
            grpc::serve(client, up, peer, fast).await
        }
    });
    shared.peers.lock().remove(name);
    result
}

/// `sockaddr_un` of the abstract name `name` and its length.
fn abstract_addr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // sun_path[0] stays NUL: the abstract namespace. Names are at most 80 bytes (checked).
    for (dst, src) in addr.sun_path[1..].iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (addr, len as libc::socklen_t)
}

/// A Unix stream socket bound to the abstract name `own`, connected to the abstract name `to`.
fn connect_abstract(own: &str, to: &str) -> io::Result<UnixStream> {
    // SAFETY: plain socket(2); the descriptor is owned by the UnixStream below or closed.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    let (mine, mine_len) = abstract_addr(own);
    let (theirs, theirs_len) = abstract_addr(to);
    // SAFETY: valid sockaddr_un values and their lengths.
    let bound = unsafe { libc::bind(fd, &mine as *const _ as *const libc::sockaddr, mine_len) };
    if bound < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let connected =
        unsafe { libc::connect(fd, &theirs as *const _ as *const libc::sockaddr, theirs_len) };
    if connected < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::Arc as StdArc;

    /// An upstream on a new abstract name that answers every chunk it reads with the chunk
    /// upper-cased, and tells the abstract name of each peer.
    fn upper_server() -> (String, StdArc<Mutex<Vec<String>>>) {
        use std::os::linux::net::SocketAddrExt;
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "rmq-front-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        let peers = StdArc::new(Mutex::new(Vec::new()));
        let seen = peers.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                let peer = s.peer_addr().unwrap();
                let peer = peer.as_abstract_name().unwrap_or_default();
                seen.lock().push(String::from_utf8_lossy(peer).into_owned());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                let up: Vec<u8> = buf[..n].to_ascii_uppercase();
                                if s.write_all(&up).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (name, peers)
    }

    #[test]
    fn enforcing_refuses_plaintext_and_a_broken_handshake_is_counted() {
        let tls = TlsServer::self_signed(TlsMode::Enforcing, &["localhost"]).unwrap();
        let front = Front::start("127.0.0.1", 0, &upper_server().0, tls).unwrap();
        let mut plain = TcpStream::connect(front.local_addr()).unwrap();
        plain.write_all(b"PRI * HTTP/2.0").unwrap();
        let mut rest = Vec::new();
        let _ = plain.read_to_end(&mut rest);
        assert!(rest.is_empty());
        // A handshake record carrying garbage.
        let mut bad = TcpStream::connect(front.local_addr()).unwrap();
        bad.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
            .unwrap();
        let _ = bad.read_to_end(&mut rest);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while front.stats().refused < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let refusals = front.take_refusals();
        assert_eq!(refusals.len(), 2, "{refusals:?}");
        assert!(
            refusals.iter().any(|r| r.contains("enforcing")),
            "{refusals:?}"
        );
        assert!(refusals.iter().any(|r| r.contains("TLS")), "{refusals:?}");
        assert!(front.take_refusals().is_empty());
    }

    #[test]
    fn an_upstream_that_is_gone_is_a_refusal() {
        let gone = format!("rmq-front-test-gone-{}", std::process::id());
        let tls = TlsServer::self_signed(TlsMode::Permissive, &["localhost"]).unwrap();
        let front = Front::start("127.0.0.1", 0, &gone, tls).unwrap();
        let mut c = TcpStream::connect(front.local_addr()).unwrap();
        c.write_all(b"hello").unwrap();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while front.stats().refused < 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let refusals = front.take_refusals();
        assert!(refusals[0].contains("does not answer"), "{refusals:?}");
    }
}
