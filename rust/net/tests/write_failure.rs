//! SYNC_FLUSH sends whose CommitLog write fails are not answered. One test in its own process:
//! it lowers the process's file size limit (RLIMIT_FSIZE) to make the write fail for real.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{fast, frame, store};
use rmq_net::{Server, ServerOptions};

fn read_frame(s: &mut TcpStream) -> Option<serde_json::Value> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut rest = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).ok()?;
    let hlen = (u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) & 0xFFFFFF) as usize;
    serde_json::from_slice(&rest[4..4 + hlen]).ok()
}

fn set_file_size_limit(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) }, 0);
}

#[test]
fn a_send_whose_write_fails_is_not_answered_and_is_written_later() {
    // Writes past the limit fail with EFBIG instead of killing the process.
    // SAFETY: ignoring a signal.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path(), true);
    let server = Server::bind("127.0.0.1", 0, ServerOptions::default()).unwrap();
    let fs = std::sync::Arc::new(fast(st.clone(), false));
    fs.allow_topic("T", 1, 1, false);
    server.set_fast_send(Some(fs.clone()));
    let no_wait = r#"{"b":"T","e":"0","i":"WAIT\u0001false"}"#;
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(&frame(310, 0, 1, no_wait, &[b'a'; 8192]))
        .unwrap();
    assert_eq!(read_frame(&mut c).unwrap()["code"], 0);
    let end = st.commitlog_max_offset();

    // The CommitLog cannot grow: the next send is stored but not written, and not answered.
    set_file_size_limit(end as u64);
    c.write_all(&frame(310, 0, 2, no_wait, b"unwritten"))
        .unwrap();
    // Closed, not merely silent: the read ends (EOF or reset) before its 10 s timeout.
    let mut byte = [0u8; 1];
    match c.read(&mut byte) {
        Ok(n) => assert_eq!(n, 0, "no answer"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    assert_eq!(st.commitlog_max_offset(), end, "nothing published");
    let said: Vec<String> = st
        .journal()
        .all()
        .into_iter()
        .filter(|e| e.kind == "deferred-write")
        .map(|e| e.message)
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains("failed") && m.contains("bytes")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|m| m.contains("1 connections closed")),
        "{said:?}"
    );

    // The disk recovers: the kept-back record is written before the next one, which is
    // answered as usual.
    set_file_size_limit(libc::RLIM_INFINITY);
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(&frame(310, 0, 3, no_wait, b"after")).unwrap();
    let ok = read_frame(&mut c).unwrap();
    assert_eq!(ok["code"], 0);
    assert_eq!(ok["extFields"]["queueOffset"], "2");
    assert!(st.commitlog_max_offset() > end);
    assert!(st
        .journal()
        .all()
        .iter()
        .any(|e| e.kind == "deferred-write" && e.message.contains("written after")));
    server.shutdown();
    st.shutdown().unwrap();
}
