//! The network thread against real sockets on loopback and a real store on disk.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use common::{frame, store};
use std::time::{Duration, Instant};

use rmq_net::{Event, Server, ServerOptions};

fn read_frame(s: &mut TcpStream) -> serde_json::Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut rest = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).unwrap();
    let hlen = (u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) & 0xFFFFFF) as usize;
    serde_json::from_slice(&rest[4..4 + hlen]).unwrap()
}

/// The next events, waiting on the server's eventfd (not acknowledged).
fn next_events(server: &Server) -> Vec<Event> {
    let mut pfd = libc::pollfd {
        fd: server.event_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert!(n > 0, "no event within 10 s");
    server.take_events()
}

/// Take and acknowledge events until `pred` has seen what it wants.
fn wait_events(server: &Server, mut pred: impl FnMut(&Event) -> bool) {
    loop {
        let found = next_events(server).iter().any(&mut pred);
        server.ack();
        if found {
            return;
        }
    }
}

/// A store on disk, a server on loopback with the fast path for topic `T` (`queues` queues),
/// and one client connection.
struct Fixture {
    _dir: tempfile::TempDir,
    st: Arc<rmq_store::MessageStore>,
    server: Server,
    fs: Arc<rmq_net::FastSend>,
    c: TcpStream,
}

fn fixture(sync: bool, queues: i32) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path(), sync);
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    let fs = Arc::new(common::fast(st.clone(), false));
    fs.allow_topic("T", queues, queues, false);
    server.set_fast_send(Some(fs.clone()));
    let c = TcpStream::connect(server.local_addr()).unwrap();
    Fixture {
        _dir: dir,
        st,
        server,
        fs,
        c,
    }
}

#[test]
fn fast_sends_are_answered_and_other_frames_go_to_the_owner() {
    let Fixture {
        _dir,
        st,
        server,
        fs,
        mut c,
    } = fixture(false, 2);
    let mut conn_id = 0;
    wait_events(&server, |e| match e {
        Event::Open { conn, .. } => {
            conn_id = *conn;
            true
        }
        _ => false,
    });
    // Two pipelined fast sends in one write.
    let mut two = frame(310, 0, 1, r#"{"b":"T","e":"0"}"#, b"a");
    two.extend(frame(310, 0, 2, r#"{"b":"T","e":"1"}"#, b"b"));
    c.write_all(&two).unwrap();
    let r1 = read_frame(&mut c);
    let r2 = read_frame(&mut c);
    assert_eq!(
        (r1["opaque"].as_i64(), r2["opaque"].as_i64()),
        (Some(1), Some(2))
    );
    assert_eq!(r1["extFields"]["TRACE_ON"], "false");
    assert_eq!(fs.puts(), 2);
    // Each send written after the answer to the one before: a wake-up of its own.
    let woke = server.wakeups();
    assert!(
        woke >= 2,
        "the accept and the two sends took {woke} wake-ups"
    );
    for i in 0..3 {
        c.write_all(&frame(310, 0, 10 + i, r#"{"b":"T","e":"0"}"#, b"w"))
            .unwrap();
        assert_eq!(read_frame(&mut c)["opaque"], 10 + i);
    }
    assert!(server.wakeups() >= woke + 3);
    // A heartbeat goes to the owner, which answers through write().
    c.write_all(&frame(34, 0, 3, r#"{}"#, b"{}")).unwrap();
    let mut got = Vec::new();
    wait_events(&server, |e| match e {
        Event::Data { conn, frames, .. } => {
            assert_eq!(*conn, conn_id);
            got = frames.clone();
            true
        }
        _ => false,
    });
    assert_eq!(got, frame(34, 0, 3, r#"{}"#, b"{}"));
    let answer = frame(0, 0, 3, r#"{"x":"y"}"#, b"");
    assert!(server.write(conn_id, &[&answer]));
    let r3 = read_frame(&mut c);
    assert_eq!(r3["opaque"], 3);
    assert!(server.last_seen(conn_id).unwrap() > 0.0);
    // Garbage closes only this connection.
    let mut other = TcpStream::connect(server.local_addr()).unwrap();
    other.write_all(&[0, 0, 0, 1, 9, 9, 9, 9]).unwrap();
    let mut buf = [0u8; 1];
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(other.read(&mut buf).unwrap_or(0), 0);
    c.write_all(&frame(310, 0, 4, r#"{"b":"T","e":"0"}"#, b"c"))
        .unwrap();
    assert_eq!(read_frame(&mut c)["opaque"], 4);
    // The owner closes the first connection.
    server.close(conn_id);
    wait_events(
        &server,
        |e| matches!(e, Event::Closed { conn } if *conn == conn_id),
    );
    assert!(!server.write(conn_id, &[b"x"]));
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn sync_flush_answers_after_the_group_commit() {
    let Fixture {
        _dir,
        st,
        server,
        fs: _,
        mut c,
    } = fixture(true, 1);
    let mut batch = Vec::new();
    for i in 0..64 {
        batch.extend(frame(310, 0, i, r#"{"b":"T","e":"0"}"#, b"durable"));
    }
    c.write_all(&batch).unwrap();
    let mut seen = Vec::new();
    for _ in 0..64 {
        let r = read_frame(&mut c);
        assert_eq!(r["code"], 0);
        seen.push(r["opaque"].as_i64().unwrap());
    }
    seen.sort();
    assert_eq!(seen, (0..64).collect::<Vec<_>>());
    assert!(st.flushed_offset() >= st.commitlog_max_offset());
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn sync_flush_one_waiter_at_a_time_is_answered_once_durable() {
    // One send in flight: the network thread flushes it itself, in the same poll round.
    let Fixture {
        _dir,
        st,
        server,
        fs: _,
        mut c,
    } = fixture(true, 1);
    for i in 0..50 {
        c.write_all(&frame(310, 0, i, r#"{"b":"T","e":"0"}"#, b"durable"))
            .unwrap();
        let r = read_frame(&mut c);
        assert_eq!(r["code"], 0);
        assert_eq!(r["opaque"], i);
        // Only this client appends: the answered message is all there is, and durable.
        assert!(st.flushed_offset() >= st.commitlog_max_offset());
    }
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn frames_after_a_diverted_one_wait_for_the_owner() {
    let Fixture {
        _dir,
        st,
        server,
        fs,
        mut c,
    } = fixture(false, 1);
    // A send for an unvetted topic, then one for a vetted topic: both go to the owner, in order.
    let mut two = frame(310, 0, 1, r#"{"b":"New","e":"0"}"#, b"a");
    two.extend(frame(310, 0, 2, r#"{"b":"T","e":"0"}"#, b"b"));
    c.write_all(&two).unwrap();
    let mut frames = Vec::new();
    while frames.len() < two.len() {
        for e in next_events(&server) {
            if let Event::Data { frames: f, .. } = e {
                frames.extend(f);
            }
        }
    }
    assert_eq!(frames, two);
    assert_eq!(fs.puts(), 0);
    // Not acknowledged yet: a new send still goes to the owner.
    c.write_all(&frame(310, 0, 3, r#"{"b":"T","e":"0"}"#, b"c"))
        .unwrap();
    while !next_events(&server)
        .iter()
        .any(|e| matches!(e, Event::Data { .. }))
    {}
    assert_eq!(fs.puts(), 0);
    server.ack();
    // Acknowledged: the fast path answers again.
    c.write_all(&frame(310, 0, 4, r#"{"b":"T","e":"0"}"#, b"d"))
        .unwrap();
    assert_eq!(read_frame(&mut c)["opaque"], 4);
    assert_eq!(fs.puts(), 1);
    // Counted: the unvetted topic, and the two sends queued behind it.
    let declined: std::collections::HashMap<_, _> = fs.stats().declined.into_iter().collect();
    assert_eq!((declined["topic"], declined["queued"]), (1, 2));
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn sends_do_not_wait_for_other_requests_the_owner_handles() {
    let Fixture {
        _dir,
        st,
        server,
        fs,
        mut c,
    } = fixture(false, 1);
    // A oneway END_TRANSACTION (37) and a heartbeat (34) go to the owner; sends behind them,
    // in the same read and after it, still take the fast path (RocketMQ orders sends only
    // among themselves).
    let end = frame(
        37,
        2,
        1,
        r#"{"producerGroup":"G","commitOrRollback":"8"}"#,
        b"",
    );
    let heartbeat = frame(34, 0, 3, "{}", b"{}");
    let mut first = end.clone();
    first.extend(frame(310, 0, 2, r#"{"b":"T","e":"0"}"#, b"a"));
    c.write_all(&first).unwrap();
    assert_eq!(read_frame(&mut c)["opaque"], 2);
    c.write_all(&heartbeat).unwrap();
    let mut owner = Vec::new();
    while owner.len() < end.len() + heartbeat.len() {
        for e in next_events(&server) {
            if let Event::Data { frames, sends, .. } = e {
                assert!(!sends, "no send among them");
                owner.extend(frames);
            }
        }
    }
    assert_eq!(owner, [end, heartbeat].concat());
    c.write_all(&frame(310, 0, 4, r#"{"b":"T","e":"0"}"#, b"b"))
        .unwrap();
    assert_eq!(
        read_frame(&mut c)["opaque"],
        4,
        "not acknowledged, not waited for"
    );
    assert_eq!(fs.puts(), 2);
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn large_and_split_frames_are_reassembled() {
    let Fixture {
        _dir,
        st,
        server,
        fs,
        mut c,
    } = fixture(false, 1);
    // Larger than the initial read buffer (64 KiB) several times over.
    let big = vec![7u8; 900 * 1024];
    c.write_all(&frame(310, 0, 1, r#"{"b":"T","e":"0"}"#, &big))
        .unwrap();
    assert_eq!(read_frame(&mut c)["opaque"], 1);
    // One frame in three writes with pauses between them.
    let f = frame(310, 0, 2, r#"{"b":"T","e":"0"}"#, b"split");
    for piece in [&f[..3], &f[3..20], &f[20..]] {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read_frame(&mut c)["opaque"], 2);
    assert_eq!(fs.puts(), 2);
    assert!(st.wait_dispatched(st.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(st.max_offset_in_queue("T", 0), 2);
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn owner_writes_larger_than_the_socket_buffer_arrive_whole() {
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    let mut conn_id = 0;
    wait_events(&server, |e| match e {
        Event::Open { conn, .. } => {
            conn_id = *conn;
            true
        }
        _ => false,
    });
    // 24 MiB while the client reads nothing yet: most of it waits in the output buffer and
    // leaves as the socket drains.
    let chunk: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    for _ in 0..24 {
        assert!(server.write(conn_id, &[&chunk]));
    }
    assert!(server.write_buffer_size(conn_id) > 0);
    let mut got = vec![0u8; 24 * chunk.len()];
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.read_exact(&mut got).unwrap();
    assert!(got.chunks(chunk.len()).all(|c| c == chunk.as_slice()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.write_buffer_size(conn_id) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(server.write_buffer_size(conn_id), 0);
    server.shutdown();
}

#[test]
fn frames_sent_before_a_reset_reach_the_owner() {
    // A client that closes with answers unread resets the connection (rocketmq-client-go sends
    // "oneway" sends as requests and shuts down right after): what it sent before stays readable.
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    let mut sent = Vec::new();
    for i in 0..20 {
        let mut c = TcpStream::connect(server.local_addr()).unwrap();
        let mut frames = Vec::new();
        for j in 0..6 {
            frames.extend(frame(310, 0, i * 10 + j, r#"{"b":"New","e":"0"}"#, b"x"));
        }
        c.write_all(&frames).unwrap();
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket and a linger struct of the size given.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&c),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        drop(c); // RST
        sent.push(frames);
    }
    let mut got: std::collections::HashMap<u64, Vec<u8>> = Default::default();
    let mut closed = 0;
    while closed < 20 {
        for e in next_events(&server) {
            match e {
                Event::Data { conn, frames, .. } => got.entry(conn).or_default().extend(frames),
                Event::Closed { .. } => closed += 1,
                Event::Open { .. } | Event::Refused { .. } => {}
            }
        }
        server.ack();
    }
    let mut got: Vec<Vec<u8>> = got.into_values().collect();
    got.sort();
    sent.sort();
    let bytes = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
    assert_eq!(bytes(&got), bytes(&sent), "bytes that reached the owner");
    assert!(
        got == sent,
        "the frames of each connection, whole and in order"
    );
    assert_eq!(server.connections(), 0);
    server.shutdown();
}

#[test]
fn data_then_eof_closes_the_connection() {
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    for _ in 0..20 {
        let mut c = TcpStream::connect(server.local_addr()).unwrap();
        // Half a frame and the end of the stream in quick succession.
        c.write_all(&[0, 0, 0, 100, 0, 0]).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut buf = [0u8; 1];
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(c.read(&mut buf).unwrap(), 0, "the server closed its side");
    }
    let mut closed = 0;
    while closed < 20 {
        closed += next_events(&server)
            .iter()
            .filter(|e| matches!(e, Event::Closed { .. }))
            .count();
        server.ack();
    }
    assert_eq!(server.connections(), 0);
    server.shutdown();
}

#[test]
fn answers_to_many_busy_connections_arrive_whole_and_in_order() {
    let Fixture {
        _dir,
        st,
        server,
        fs,
        c,
    } = fixture(false, 4);
    drop(c);
    // Eight clients pipeline 2,000 sends each before reading anything, with small receive
    // buffers: the answers of one poll round go out together, and many only in part, the
    // rest waiting in the output buffer for the socket to drain.
    const CONNS: usize = 8;
    const SENDS: i32 = 2000;
    let addr = server.local_addr();
    let clients: Vec<_> = (0..CONNS)
        .map(|k| {
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                let small: libc::c_int = 16384;
                // SAFETY: a valid socket and a c_int option value of the right size.
                unsafe {
                    libc::setsockopt(
                        std::os::fd::AsRawFd::as_raw_fd(&c),
                        libc::SOL_SOCKET,
                        libc::SO_RCVBUF,
                        (&small as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    );
                }
                let mut all = Vec::new();
                for i in 0..SENDS {
                    let ext = format!(r#"{{"b":"T","e":"{}"}}"#, k % 4);
                    all.extend(frame(310, 0, i, &ext, format!("c{k}m{i}").as_bytes()));
                }
                c.write_all(&all).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                (0..SENDS)
                    .map(|_| {
                        let r = read_frame(&mut c);
                        assert_eq!(r["code"], 0);
                        r["opaque"].as_i64().unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for t in clients {
        assert_eq!(t.join().unwrap(), (0..SENDS as i64).collect::<Vec<_>>());
    }
    assert_eq!(fs.puts(), CONNS as u64 * SENDS as u64);
    server.shutdown();
    st.shutdown().unwrap();
}

#[test]
fn a_send_that_waited_too_long_goes_to_the_owner_with_its_read_time() {
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path(), false);
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    // waitTimeMillsInSendQueue=0: every send has waited long enough to be refused.
    let fs = Arc::new(common::fast(st.clone(), false).with_fast_failure(0, 1000));
    fs.allow_topic("T", 1, 1, false);
    server.set_fast_send(Some(fs.clone()));
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    c.write_all(&frame(310, 0, 7, r#"{"b":"T","e":"0"}"#, b"late"))
        .unwrap();
    let mut got = Vec::new();
    wait_events(&server, |e| match e {
        Event::Data {
            frames, read_ns, ..
        } => {
            got = frames.clone();
            assert!(*read_ns > 0);
            true
        }
        _ => false,
    });
    assert_eq!(got, frame(310, 0, 7, r#"{"b":"T","e":"0"}"#, b"late"));
    assert_eq!(fs.puts(), 0, "not stored by the fast path");
    let busy = fs
        .stats()
        .declined
        .iter()
        .find(|(n, _)| *n == "busy")
        .unwrap()
        .1;
    assert_eq!(busy, 1);
}

/// A PULL_MESSAGE frame of group `g` on T's queue 0 with the suspend bit, from `offset`.
fn suspended_pull(opaque: i32, offset: i64, suspend_ms: u32) -> Vec<u8> {
    let ext = format!(
        r#"{{"consumerGroup":"g","topic":"T","queueId":"0","queueOffset":"{offset}","maxMsgNums":"32","sysFlag":"2","commitOffset":"0","subVersion":"0","suspendTimeoutMillis":"{suspend_ms}"}}"#
    );
    frame(11, 0, opaque, &ext, b"")
}

#[test]
fn held_pulls_are_answered_by_a_dispatch_or_when_their_time_is_over() {
    let Fixture {
        _dir,
        st,
        server,
        fs,
        mut c,
    } = fixture(false, 1);
    fs.pull().allow("g", "T", 1, None, None, 0, 0);
    fs.pull().set_holding(true);
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();

    // Held with nothing in the queue; a send on another connection wakes it.
    c.write_all(&suspended_pull(7, 0, 20_000)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut other = TcpStream::connect(server.local_addr()).unwrap();
    other
        .write_all(&frame(310, 0, 1, r#"{"b":"T","e":"0"}"#, b"hello"))
        .unwrap();
    assert_eq!(read_frame(&mut other)["code"], 0);
    // Woken by the send: its 20 s are far beyond the read timeout above.
    let woken = read_frame(&mut c);
    assert_eq!(
        (woken["opaque"].as_i64(), woken["code"].as_i64()),
        (Some(7), Some(0))
    );
    assert_eq!(woken["remark"], "FOUND");
    // Its records follow the header in the same frame (read_frame consumed them).
    assert_eq!(st.max_offset_in_queue("T", 0), 1);

    // Nothing new after it: answered PULL_NOT_FOUND once its 300 ms are over.
    c.write_all(&suspended_pull(8, 1, 300)).unwrap();
    let late = read_frame(&mut c);
    assert_eq!(
        (late["opaque"].as_i64(), late["code"].as_i64()),
        (Some(8), Some(19))
    );
    assert_eq!(late["extFields"]["nextBeginOffset"], "1");
    // None of these went to the owner.
    assert!(server
        .take_events()
        .iter()
        .all(|e| !matches!(e, Event::Data { .. })));
}
