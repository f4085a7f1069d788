//! SYNC_MASTER on the fast path: answers wait for the slave's acknowledgement as reported by
//! `Server::set_replicated`, against real sockets on loopback and a real store on disk.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::{frame, store};
use rmq_net::send::{FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE};
use rmq_net::{ReplicaReport, Replication, Server, ServerOptions};
use rmq_store::message::decode_offset_msg_id;

fn read_frame(s: &mut TcpStream) -> serde_json::Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut rest = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).unwrap();
    let hlen = (u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) & 0xFFFFFF) as usize;
    serde_json::from_slice(&rest[4..4 + hlen]).unwrap()
}

/// Nothing more is readable on `c` right now.
fn nothing_readable(c: &mut TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let r = c.read(&mut [0u8; 1]);
    c.set_nonblocking(false).unwrap();
    matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock)
}

fn physical_offset(answer: &serde_json::Value) -> i64 {
    let id = answer["extFields"]["msgId"].as_str().unwrap();
    decode_offset_msg_id(id).unwrap().1
}

fn send(opaque: i32, body: &[u8]) -> Vec<u8> {
    frame(310, 0, opaque, r#"{"b":"T","e":"0"}"#, body)
}

#[test]
fn sync_master_answers_wait_for_the_slave() {
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path(), false);
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    let timeout = Duration::from_millis(300);
    let fs =
        Arc::new(common::fast(st.clone(), false).sync_master(Replication::new(65536, timeout)));
    fs.allow_topic("T", 1, 1, false);
    server.set_fast_send(Some(fs.clone()));
    let r = fs.replication().unwrap();
    let mut c = TcpStream::connect(server.local_addr()).unwrap();

    // No slave connected: stored, answered SLAVE_NOT_AVAILABLE at once.
    c.write_all(&send(1, b"replicated")).unwrap();
    let a = read_frame(&mut c);
    assert_eq!(a["code"], SLAVE_NOT_AVAILABLE);
    assert_eq!(a["opaque"], 1);
    assert_eq!(a["extFields"]["queueOffset"], "0");
    let report = r.take_report();
    assert_eq!(
        (report.no_slave, report.lagging, report.timeouts),
        (1, 0, 0)
    );
    // Every record of these sends has this size.
    let size = st.commitlog_max_offset() - physical_offset(&a);

    // A slave: four sends are answered as its acknowledgements cover them.
    r.set_connected(true);
    let start = st.commitlog_max_offset();
    server.set_replicated(start + 2 * size);
    let mut burst = Vec::new();
    for i in 10..14 {
        burst.extend(send(i, b"replicated"));
    }
    c.write_all(&burst).unwrap();
    let first: Vec<_> = (0..2).map(|_| read_frame(&mut c)).collect();
    assert_eq!(first[0]["opaque"], 10);
    assert_eq!(first[1]["opaque"], 11);
    assert!(first.iter().all(|a| a["code"] == 0));
    assert_eq!(physical_offset(&first[1]), start + size);
    assert!(
        nothing_readable(&mut c),
        "the unacknowledged two are still held"
    );
    server.set_replicated(start + 4 * size);
    let rest: Vec<_> = (0..2).map(|_| read_frame(&mut c)).collect();
    assert_eq!(rest[0]["opaque"], 12);
    assert_eq!(rest[1]["opaque"], 13);
    assert!(rest.iter().all(|a| a["code"] == 0));

    // The slave stops acknowledging: FLUSH_SLAVE_TIMEOUT after slaveTimeout.
    c.write_all(&send(20, b"not acknowledged")).unwrap();
    let a = read_frame(&mut c);
    assert_eq!(a["code"], FLUSH_SLAVE_TIMEOUT);
    assert_eq!(a["opaque"], 20);
    assert!(a["extFields"]["msgId"].as_str().is_some());
    let report = r.take_report();
    assert_eq!(
        (report.no_slave, report.lagging, report.timeouts),
        (0, 0, 1)
    );

    // ...and once it lags haSlaveFallbehindMax or more, SLAVE_NOT_AVAILABLE at once.
    let acked = r.acked();
    c.write_all(&send(21, &vec![b'x'; 70_000])).unwrap();
    let a = read_frame(&mut c);
    assert_eq!(a["code"], SLAVE_NOT_AVAILABLE);
    assert_eq!(a["opaque"], 21);
    let report = r.take_report();
    assert_eq!(
        report,
        ReplicaReport {
            timeouts: 0,
            no_slave: 0,
            lagging: 1,
            lag_end: st.commitlog_max_offset(),
            lag_acked: acked,
        }
    );
    // Every answer was given by the fast path.
    let stats = fs.stats();
    assert_eq!((stats.taken, stats.messages), (7, 7));
    server.shutdown();
    st.shutdown().unwrap();
}
