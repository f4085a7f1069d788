//! rmq-net: the broker's network thread.
//!
//! * [`frame`]: splitting a byte stream into RocketMQ remoting frames, writing JSON response
//!   headers (sans-I/O);
//! * [`send`]: the SEND fast path — SEND_MESSAGE / SEND_MESSAGE_V2 for vetted topics stored
//!   and answered without leaving Rust;
//! * [`server`]: the mio thread that owns the listening socket and the connections, answers
//!   fast-path sends (holding SYNC_FLUSH answers for the group commit) and hands every other
//!   frame to its owner, the Python event loop.

pub mod batch;
pub mod frame;
pub mod send;
pub mod server;

pub use send::{FastSend, FastSendConfig};
pub use server::{Event, Server, ServerOptions};
