//! Several sockets written in one system call (io_uring `SEND`s submitted together).
//!
//! A broker answering many connections at once otherwise makes one `send` per connection, and
//! each `send` that wakes a client lets that client preempt the network thread on the way back
//! to user space. Submitted together, the answers of a poll round all leave before this thread
//! can be preempted, and each client wakes once to find all of its answers.
//!
//! Every send carries `MSG_DONTWAIT`: it completes at once with what the socket took (or
//! `EAGAIN`), never waits, so no buffer outlives the call. Where io_uring is not available
//! (old kernel, disabled by sysctl or seccomp) [`SendBatch::send_all`] returns `None` and the
//! caller writes with plain `send`s.

use io_uring::{opcode, types, IoUring};

/// Submission queue size; larger batches go in several submissions.
const RING_ENTRIES: u32 = 64;

pub struct SendBatch {
    ring: Option<IoUring>,
    sent: Vec<Option<usize>>,
}

impl SendBatch {
    /// A batch sender; without io_uring every [`SendBatch::send_all`] returns `None`.
    pub fn new() -> SendBatch {
        SendBatch {
            ring: IoUring::new(RING_ENTRIES).ok(),
            sent: Vec::new(),
        }
    }

    /// Whether batches go through io_uring.
    pub fn available(&self) -> bool {
        self.ring.is_some()
    }

    /// Send each `(fd, bytes)` without blocking, all in as few system calls as the ring
    /// allows. Returns what each socket took: `Some(n)` bytes (0 when it took none or failed:
    /// a broken connection is reported by the poller), or `None` when it is unknown whether
    /// the bytes left (the connection can only be closed). Returns `None` as a whole when
    /// nothing could be submitted and nothing was sent.
    pub fn send_all(&mut self, items: &[(i32, &[u8])]) -> Option<&[Option<usize>]> {
        let ring = self.ring.as_mut()?;
        self.sent.clear();
        self.sent.resize(items.len(), Some(0));
        let mut broken = false;
        for (chunk_no, chunk) in items.chunks(RING_ENTRIES as usize).enumerate() {
            let base = chunk_no * RING_ENTRIES as usize;
            {
                let mut sq = ring.submission();
                for (i, (fd, data)) in chunk.iter().enumerate() {
                    let len = data.len().min(u32::MAX as usize) as u32;
                    let sqe = opcode::Send::new(types::Fd(*fd), data.as_ptr(), len)
                        .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                        .build()
                        .user_data((base + i) as u64);
                    // SAFETY: the buffer stays borrowed (and alive) until this function
                    // returns; MSG_DONTWAIT makes every send complete during the submit call
                    // instead of waiting for the socket, and its completion is reaped below.
                    // Each chunk fits the ring, which is empty here, so the push succeeds.
                    let _ = unsafe { sq.push(&sqe) };
                }
            }
            let mut submitted = false;
            let mut done = 0;
            while done < chunk.len() {
                match ring.submit_and_wait(chunk.len() - done) {
                    Ok(_) => submitted = true,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(_) => {
                        broken = true;
                        break;
                    }
                }
                for cqe in ring.completion() {
                    let k = cqe.user_data() as usize;
                    if let Some(slot) = self.sent.get_mut(k) {
                        *slot = Some(cqe.result().max(0) as usize);
                    }
                    done += 1;
                }
            }
            if broken {
                if !submitted {
                    if chunk_no == 0 {
                        // Nothing left: the caller sends the plain way, now and from now on.
                        self.ring = None;
                        return None;
                    }
                    // This chunk and the rest stay unsent (0): the caller buffers them.
                } else {
                    // Submitted but not all reaped: whether those bytes left is unknown.
                    for slot in &mut self.sent[base + done..base + chunk.len()] {
                        *slot = None;
                    }
                }
                break;
            }
        }
        if broken {
            // Dropping the ring discards whatever is still queued in it.
            self.ring = None;
        }
        Some(&self.sent)
    }
}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn sends_to_several_sockets_and_never_blocks_on_a_full_one() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).unwrap();
        let (mut a_peer, _) = listener.accept().unwrap();
        let b = TcpStream::connect(addr).unwrap();
        let (b_peer, _) = listener.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let mut batch = SendBatch::new();
        if !batch.available() {
            assert!(batch.send_all(&[(a.as_raw_fd(), b"x")]).is_none());
            return;
        }
        let sent = batch
            .send_all(&[(a.as_raw_fd(), b"hello"), (b.as_raw_fd(), b"world!")])
            .unwrap()
            .to_vec();
        assert_eq!(sent, vec![Some(5), Some(6)]);
        let mut got = [0u8; 5];
        a_peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        // b's peer never reads: fill its socket until a send takes less than offered.
        let big = vec![7u8; 1 << 20];
        let mut total = 0;
        let mut short = false;
        for _ in 0..256 {
            let n = batch.send_all(&[(b.as_raw_fd(), &big)]).unwrap()[0].unwrap();
            total += n;
            if n < big.len() {
                short = true;
                break;
            }
        }
        assert!(
            short,
            "a socket nobody reads took {total} bytes without a short send"
        );
        // A full socket answers at once with nothing taken, and the other socket still works.
        let sent = batch
            .send_all(&[(b.as_raw_fd(), b"more"), (a.as_raw_fd(), b"again")])
            .unwrap()
            .to_vec();
        assert_eq!(sent, vec![Some(0), Some(5)]);
        a_peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"again");
        drop(b_peer);
    }
}
