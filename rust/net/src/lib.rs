//! rmq-net: the broker's network thread.
//!
//! * [`acl`]: ACL 1.0 signatures and PUB permissions of sends checked on the fast path,
//!   against the rules the Python validator pushes;
//! * [`front`]: the gRPC port's front — TLS and plaintext clients on one port, passed on in
//!   plain text to the gRPC server on loopback;
//! * [`frame`]: splitting a byte stream into RocketMQ remoting frames, writing JSON response
//!   headers (sans-I/O);
//! * [`header`]: send request headers as the official clients spell them (sans-I/O);
//! * [`send`]: the SEND fast path — SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE for
//!   vetted topics stored and answered without leaving Rust;
//! * [`long_poll`]: the pulls the PULL fast path holds until their queue grows or their
//!   suspend time is over (RocketMQ's long polling);
//! * [`pull`]: the PULL fast path — PULL_MESSAGE requests that find messages, for vetted
//!   (group, topic) pairs, answered without leaving Rust;
//! * [`metrics`]: per-topic messages, bytes and sizes the fast path stored, and its answers'
//!   latency, for the broker's Prometheus metrics;
//! * [`replica`]: SYNC_MASTER on the fast path — the slave's state as the HA master reports
//!   it, and the answers held for a slave's acknowledgement and for the flush;
//! * [`stats`]: what the fast path took and what it left to Python, and why;
//! * [`server`]: the mio thread that owns the listening socket and the connections, answers
//!   fast-path sends (holding SYNC_MASTER and SYNC_FLUSH answers for the slave and the flush) and hands every other
//!   frame to its owner, the Python event loop;
//! * [`transaction`]: the END_TRANSACTION fast path — commits and rollbacks of half messages,
//!   decided once (a claim set shared with the Python side);
//! * [`tls`]: TLS sessions of its connections (rustls), RocketMQ's `tls.server.*` modes.

pub mod acl;
pub mod batch;
pub mod codes;
pub mod frame;
pub mod front;
pub mod grpc;
pub mod header;
pub mod held;
pub mod long_poll;
pub mod metrics;
pub mod pull;
pub mod replica;
pub mod send;
pub mod server;
pub mod stats;
pub mod tls;
pub mod transaction;

pub use acl::{AclAccount, AclGate, AclRules, AclStats};
pub use front::{Front, FrontStats};
pub use metrics::{LatencySnapshot, MetricsSnapshot, TopicInSnapshot};
pub use pull::{FastPull, QueueTaken};
pub use replica::{ReplicaReport, Replication};
pub use send::{FastSend, FastSendConfig};
pub use server::{Event, Server, ServerOptions};
pub use stats::{Decline, Stats};
pub use tls::{ClientAuth, TlsMode, TlsServer};
