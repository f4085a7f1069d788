//! Several sockets written in one system call (io_uring `SEND`s submitted together).
//!
//! A broker answering many connections at once otherwise makes one `send` per connection, and
//! each `send` that wakes a client lets that client preempt the network thread on the way back
//! to user space. Submitted together, the answers of a poll round all leave before this thread
//! can be preempted, and each client wakes once to find all of its answers.
//!
//! Every send carries `MSG_DONTWAIT`: it completes at once with what the socket took (or
//! `EAGAIN`), never waits, so no buffer outlives the call. A single socket, or every socket
//! where io_uring is not available (old kernel, disabled by sysctl or seccomp), is written with
//! plain `send` calls ([`send_some`]).

use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

/// Submission queue size; larger batches go in several submissions.
const RING_ENTRIES: u32 = 64;

const SEND_FLAGS: i32 = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;

/// Write `data` to the socket until done or it would block; errors end the attempt (the
/// poller reports the broken connection). Returns the bytes written.
pub fn send_some(fd: RawFd, data: &[u8]) -> usize {
    let mut n = 0;
    while n < data.len() {
        let rest = &data[n..];
        // SAFETY: `rest` is a valid, initialised buffer of `rest.len()` bytes for the call.
        let k = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), SEND_FLAGS) };
        if k > 0 {
            n += k as usize;
        } else if k < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            break;
        }
    }
    n
}

pub struct SendBatch {
    ring: Option<IoUring>,
    sent: Vec<Option<usize>>,
}

/// Nothing of the batch was submitted: send it the plain way.
struct NotSubmitted;

impl SendBatch {
    /// A batch sender using io_uring where the kernel allows it.
    pub fn new() -> SendBatch {
        SendBatch {
            ring: IoUring::new(RING_ENTRIES).ok(),
            sent: Vec::new(),
        }
    }

    /// A batch sender that always makes plain `send` calls.
    pub fn without_io_uring() -> SendBatch {
        SendBatch {
            ring: None,
            sent: Vec::new(),
        }
    }

    /// Send each `(fd, bytes)` without blocking. Returns what each socket took: `Some(n)`
    /// bytes (0 when it took none or failed: a broken connection is reported by the poller),
    /// or `None` when it is unknown whether the bytes left (the connection can only be
    /// closed; io_uring failing after a submission, which does not happen in practice).
    pub fn send_all(&mut self, items: &[(RawFd, &[u8])]) -> &[Option<usize>] {
        self.sent.clear();
        self.sent.resize(items.len(), Some(0));
        if items.len() < 2 || self.submit(items).is_err() {
            for (slot, (fd, data)) in self.sent.iter_mut().zip(items) {
                *slot = Some(send_some(*fd, data));
            }
        }
        &self.sent
    }

    /// The io_uring way; `Err` when nothing was sent (no ring, or it refused the first
    /// submission, after which it is given up).
    fn submit(&mut self, items: &[(RawFd, &[u8])]) -> Result<(), NotSubmitted> {
        let ring = self.ring.as_mut().ok_or(NotSubmitted)?;
        let mut broken = false;
        for (chunk_no, chunk) in items.chunks(RING_ENTRIES as usize).enumerate() {
            let base = chunk_no * RING_ENTRIES as usize;
            {
                let mut sq = ring.submission();
                for (i, (fd, data)) in chunk.iter().enumerate() {
                    let len = data.len().min(u32::MAX as usize) as u32;
                    let sqe = opcode::Send::new(types::Fd(*fd), data.as_ptr(), len)
                        .flags(SEND_FLAGS)
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
                    if let Some(slot) = self.sent.get_mut(cqe.user_data() as usize) {
                        *slot = Some(cqe.result().max(0) as usize);
                    }
                    done += 1;
                }
            }
            if broken {
                if !submitted {
                    if chunk_no == 0 {
                        // Dropping the ring discards what is queued in it.
                        self.ring = None;
                        return Err(NotSubmitted);
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
            self.ring = None;
        }
        Ok(())
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
        // io_uring where the kernel has it, and the plain calls.
        for mut batch in [SendBatch::new(), SendBatch::without_io_uring()] {
            several_sockets(&mut batch);
        }
    }

    fn several_sockets(batch: &mut SendBatch) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).unwrap();
        let (mut a_peer, _) = listener.accept().unwrap();
        let b = TcpStream::connect(addr).unwrap();
        let (b_peer, _) = listener.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let (a, b) = (a.as_raw_fd(), b.as_raw_fd());
        let sent = batch.send_all(&[(a, b"hello"), (b, b"world!")]).to_vec();
        assert_eq!(sent, vec![Some(5), Some(6)]);
        let mut got = [0u8; 5];
        a_peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        // b's peer never reads: fill its socket until a send takes less than offered.
        let big = vec![7u8; 1 << 20];
        let mut total = 0;
        let mut short = false;
        for _ in 0..256 {
            let n = batch.send_all(&[(b, &big), (a, b"")])[0].unwrap();
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
        let sent = batch.send_all(&[(b, b"more"), (a, b"again")]).to_vec();
        assert_eq!(sent, vec![Some(0), Some(5)]);
        a_peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"again");
        drop(b_peer);
    }
}
