//! Binding of rmq-net: the broker's network thread, driven by the Python event loop.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use std::collections::HashMap;

use rmq_net::grpc::routes::{ClientFacts, FastSends, WriteQueue};
use rmq_net::{
    AclAccount, AclRules, ClientAuth, Decline, Event, FastSend, FastSendConfig, Front, Replication,
    Server, ServerOptions, Stats, TlsMode, TlsServer,
};

use crate::MessageStore;

/// Event kinds in `take_events()` tuples.
const OPEN: i32 = 0;
const DATA: i32 = 1;
const CLOSED: i32 = 2;
const REFUSED: i32 = 3;

/// `(mode, cert_path, key_path, trust_cert_path, need_client_auth)` as the Python side names them.
type TlsArgs = (String, String, String, String, String);

fn tls_server(args: &TlsArgs) -> PyResult<TlsServer> {
    let (mode, cert, key, trust, auth) = args;
    let mode = match mode.as_str() {
        "permissive" => TlsMode::Permissive,
        "enforcing" => TlsMode::Enforcing,
        other => {
            return Err(PyValueError::new_err(format!(
                "tls.server.mode {other:?} is not permissive or enforcing"
            )))
        }
    };
    let auth = match auth.as_str() {
        "none" => ClientAuth::None,
        "optional" => ClientAuth::Optional,
        "require" => ClientAuth::Require,
        other => {
            return Err(PyValueError::new_err(format!(
                "tls.server.need.client.auth {other:?} is not none, optional or require"
            )))
        }
    };
    TlsServer::load(mode, cert, key, trust, auth).map_err(PyValueError::new_err)
}

/// The network thread: listens on `host:port`, answers fast-path sends itself and queues
/// everything else as events for the event loop (watch `event_fd()`, then `take_events()`,
/// handle them, `ack()`).
#[pyclass(frozen, module = "rmq._store")]
struct NetServer {
    inner: Server,
}

fn contiguous(buf: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err("buffer is not contiguous"));
    }
    // SAFETY: a C-contiguous buffer of `len_bytes()` bytes at `buf_ptr()`, kept alive (and
    // its exporter pinned) by `buf` for the borrow's lifetime.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) })
}

#[pymethods]
impl NetServer {
    #[new]
    #[pyo3(signature = (host, port, max_frame = 16 * 1024 * 1024, flush_timeout_ms = 5000, tls = None, spin_us = rmq_net::server::DEFAULT_SPIN_US))]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        max_frame: usize,
        flush_timeout_ms: u64,
        tls: Option<TlsArgs>,
        spin_us: u64,
    ) -> PyResult<Self> {
        let tls = tls.as_ref().map(tls_server).transpose()?;
        let opts = ServerOptions {
            max_frame,
            flush_timeout: Duration::from_millis(flush_timeout_ms),
            tls,
            spin: Duration::from_micros(spin_us),
            ..ServerOptions::default()
        };
        let inner = py
            .detach(|| Server::bind(host, port, opts))
            .map_err(|e| PyOSError::new_err(format!("cannot listen on {host}:{port}: {e}")))?;
        Ok(NetServer { inner })
    }

    /// The bound port.
    #[getter]
    fn port(&self) -> u16 {
        self.inner.local_addr().port()
    }

    /// Readable when events wait.
    fn event_fd(&self) -> i32 {
        self.inner.event_fd()
    }

    /// `[(kind, conn, a, b), ...]`: `(0, conn, peer, local)` a new connection,
    /// `(1, conn, frames, read_at)` whole frames for the event loop (`read_at`: when the thread
    /// read them, CLOCK_MONOTONIC seconds as `time.monotonic()`), `(2, conn, None, None)` closed,
    /// `(3, conn, peer, reason)` refused by TLS (a closed event follows).
    fn take_events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let events = self.inner.take_events();
        let list = PyList::empty(py);
        for e in events {
            let t = match e {
                Event::Open { conn, peer, local } => PyTuple::new(
                    py,
                    [
                        OPEN.into_pyobject(py)?.into_any(),
                        conn.into_pyobject(py)?.into_any(),
                        peer.to_string().into_pyobject(py)?.into_any(),
                        local.to_string().into_pyobject(py)?.into_any(),
                    ],
                )?,
                Event::Data {
                    conn,
                    frames,
                    read_ns,
                    ..
                } => PyTuple::new(
                    py,
                    [
                        DATA.into_pyobject(py)?.into_any(),
                        conn.into_pyobject(py)?.into_any(),
                        PyBytes::new(py, &frames).into_any(),
                        (read_ns as f64 / 1e9).into_pyobject(py)?.into_any(),
                    ],
                )?,
                Event::Refused { conn, peer, reason } => PyTuple::new(
                    py,
                    [
                        REFUSED.into_pyobject(py)?.into_any(),
                        conn.into_pyobject(py)?.into_any(),
                        peer.to_string().into_pyobject(py)?.into_any(),
                        reason.into_pyobject(py)?.into_any(),
                    ],
                )?,
                Event::Closed { conn } => PyTuple::new(
                    py,
                    [
                        CLOSED.into_pyobject(py)?.into_any(),
                        conn.into_pyobject(py)?.into_any(),
                        py.None().into_bound(py),
                        py.None().into_bound(py),
                    ],
                )?,
            };
            list.append(t)?;
        }
        Ok(list)
    }

    /// The events of the last `take_events()` are handled.
    fn ack(&self) {
        self.inner.ack();
    }

    /// Write bytes-like parts to a connection; False if it is closed.
    fn write(&self, py: Python<'_>, conn: u64, parts: Vec<PyBuffer<u8>>) -> PyResult<bool> {
        let slices: Vec<&[u8]> = parts.iter().map(contiguous).collect::<PyResult<_>>()?;
        let server = &self.inner;
        Ok(py.detach(|| server.write(conn, &slices)))
    }

    /// Close after the buffered output is written.
    fn close(&self, conn: u64) {
        self.inner.close(conn);
    }

    /// Close now.
    fn abort(&self, conn: u64) {
        self.inner.abort(conn);
    }

    fn write_buffer_size(&self, conn: u64) -> usize {
        self.inner.write_buffer_size(conn)
    }

    /// `time.monotonic()` of the last bytes received on `conn` (None once closed).
    fn last_seen(&self, conn: u64) -> Option<f64> {
        self.inner.last_seen(conn)
    }

    /// Answer SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE for vetted topics in the
    /// network thread. `sync_master`: `(haSlaveFallbehindMax, slaveTimeout ms)` on a
    /// SYNC_MASTER, whose answers wait for a slave (see `set_replicated`). `acl`: ACL on, a
    /// send is taken only when its signature and PUB permission check out against the rules
    /// `set_acl_rules` pushes (none until then: every send goes to Python). `fast_failure`:
    /// `(waitTimeMillsInSendQueue, osPageCacheBusyTimeOutMills)` with `brokerFastFailureEnable`
    /// on: a send read longer ago, or met while an append holds the put lock longer, goes to
    /// Python, which answers it SYSTEM_BUSY.
    #[pyo3(signature = (store, cluster_name, region_id, trace_on, max_body, version, sync_master = None, acl = false, fast_failure = None))]
    #[allow(clippy::too_many_arguments)]
    fn enable_fast_send(
        &self,
        store: PyRef<'_, MessageStore>,
        cluster_name: String,
        region_id: String,
        trace_on: bool,
        max_body: usize,
        version: i32,
        sync_master: Option<(i64, i64)>,
        acl: bool,
        fast_failure: Option<(u64, i64)>,
    ) {
        let mut fast = FastSend::new(
            store.inner.clone(),
            FastSendConfig {
                cluster_name,
                region_id,
                trace_on,
                max_body,
                version,
            },
        );
        if let Some((fallbehind_max, timeout_ms)) = sync_master {
            // As the Python path: a timeout of 0 or less times out at once, a fallbehind max of
            // 0 or less finds every slave lagging.
            let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
            fast = fast.sync_master(Replication::new(fallbehind_max, timeout));
        }
        if acl {
            fast = fast.with_acl();
        }
        if let Some((wait_ms, page_cache_busy_ms)) = fast_failure {
            fast = fast.with_fast_failure(wait_ms, page_cache_busy_ms);
        }
        self.inner.set_fast_send(Some(Arc::new(fast)));
    }

    /// ACL on: the rules the fast path checks sends against, as the Python validator compiled
    /// them: per account `(access_key, secret_key, default_pub, [(topic, pub), ...])`. Replaces
    /// the rules in force; ValueError when the fast path is not on with ACL.
    #[allow(clippy::type_complexity)]
    fn set_acl_rules(
        &self,
        accounts: Vec<(String, String, bool, Vec<(String, bool)>)>,
    ) -> PyResult<()> {
        let fast = self.inner.fast_send();
        let Some(gate) = fast.as_ref().and_then(|f| f.acl()) else {
            return Err(PyValueError::new_err(
                "set_acl_rules: the send fast path is not enabled with acl=True",
            ));
        };
        let rules = AclRules::new(accounts.into_iter().map(|(ak, sk, default_pub, topics)| {
            let topics: HashMap<String, bool> = topics.into_iter().collect();
            (ak, AclAccount::new(&sk, default_pub, topics))
        }));
        gate.set_rules(rules);
        Ok(())
    }

    /// ACL on: `(checked, declined, loads, accounts)`: sends the fast path took after checking
    /// their signature and permission, sends that check left to Python, times rules were pushed,
    /// accounts in force; None with ACL off or before `enable_fast_send`.
    fn fast_send_acl_stats(&self) -> Option<(u64, u64, u64, u64)> {
        let s = self.inner.fast_send()?.acl_stats()?;
        Some((s.checked, s.declined, s.loads, s.accounts))
    }

    /// SYNC_MASTER: a slave acknowledged the CommitLog up to `offset` (call once per higher
    /// ack; the network thread releases every answer it covers).
    fn set_replicated(&self, offset: i64) {
        self.inner.set_replicated(offset);
    }

    /// SYNC_MASTER: whether a slave is connected (call when it changes).
    fn set_slave_connected(&self, connected: bool) {
        if let Some(r) = self
            .inner
            .fast_send()
            .as_ref()
            .and_then(|f| f.replication())
        {
            r.set_connected(connected);
        }
    }

    /// SYNC_MASTER: `(timeouts, no_slave, lagging, lag_end, lag_acked)`, the fast path's
    /// FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE answers (with no slave connected, with the
    /// slave lagging) since the last call, and the last lagging one's record end and the offset
    /// the slave had acknowledged; None unless SYNC_MASTER.
    fn take_replica_report(&self) -> Option<(u64, u64, u64, i64, i64)> {
        let f = self.inner.fast_send()?;
        let r = f.replication()?.take_report();
        Some((r.timeouts, r.no_slave, r.lagging, r.lag_end, r.lag_acked))
    }

    /// Let sends to `topic` take the fast path.
    fn allow_topic(&self, topic: &str, read_queues: i32, write_queues: i32, multi_tag: bool) {
        if let Some(f) = self.inner.fast_send() {
            f.allow_topic(topic, read_queues, write_queues, multi_tag);
        }
    }

    /// Let transactional half messages to vetted topics take the fast path (the broker
    /// created RMQ_SYS_TRANS_HALF_TOPIC and takes transactional messages); forgotten with the
    /// vetted topics.
    fn allow_half(&self) {
        if let Some(f) = self.inner.fast_send() {
            f.allow_half();
        }
    }

    /// Forget one vetted topic (its config changed or it was deleted).
    fn forget_topic(&self, topic: &str) {
        if let Some(f) = self.inner.fast_send() {
            f.forget_topic(topic);
        }
    }

    /// Forget every vetted topic (a broker-wide rule changed).
    fn forget_topics(&self) {
        if let Some(f) = self.inner.fast_send() {
            f.forget_topics();
        }
    }

    /// Let pulls of `group` on `topic` that find messages take the fast path (the broker
    /// answered one FOUND: broker and topic readable, the group consuming, a tag subscription,
    /// no ACL, a master). `tag_codes`: the subscription's (None: `*`); `suggest`: the
    /// answers' `suggestWhichBrokerId`.
    #[pyo3(signature = (group, topic, read_queues, tag_codes, sub_version, suggest, sql_filter = None))]
    #[allow(clippy::too_many_arguments)]
    fn allow_pull(
        &self,
        group: &str,
        topic: &str,
        read_queues: i32,
        tag_codes: Option<Vec<i32>>,
        sub_version: i64,
        suggest: i64,
        sql_filter: Option<PyRef<'_, crate::filter::PySql92Filter>>,
    ) {
        let sql = sql_filter.map(|f| f.inner().clone());
        if let Some(f) = self.inner.fast_send() {
            f.pull().allow(
                group,
                topic,
                read_queues,
                tag_codes,
                sql,
                sub_version,
                suggest,
            );
        }
    }

    /// Let pulls of `group` on `topic` that carry their own tag subscription (a lite pull
    /// consumer's) and find messages take the fast path.
    fn allow_pull_lite(&self, group: &str, topic: &str, read_queues: i32, suggest: i64) {
        if let Some(f) = self.inner.fast_send() {
            f.pull().allow_lite(group, topic, read_queues, suggest);
        }
    }

    /// Hold the vetted pulls that find nothing new in the network thread until a message
    /// arrives or their suspend time is over (RocketMQ's `longPollingEnable`); off: they go to
    /// the Python path, which holds them.
    fn set_pull_holding(&self, on: bool) {
        if let Some(f) = self.inner.fast_send() {
            f.pull().set_holding(on);
        }
    }

    /// Forget the vetted pulls of `group` (its config or its subscription changed).
    fn forget_pull_group(&self, group: &str) {
        if let Some(f) = self.inner.fast_send() {
            f.pull().forget_group(group);
        }
    }

    /// What the PULL fast path served since the last call: `(group, topic, queue_id,
    /// requests, messages, bytes, next_begin_offset, commit_offset or None)` per queue.
    #[allow(clippy::type_complexity)]
    fn take_pulls(&self) -> Vec<(String, String, i32, u64, u64, u64, i64, Option<i64>)> {
        let Some(f) = self.inner.fast_send() else {
            return Vec::new();
        };
        f.pull()
            .take_taken()
            .into_iter()
            .map(|((group, topic, queue), t)| {
                (
                    group,
                    topic,
                    queue,
                    t.requests,
                    t.messages,
                    t.bytes,
                    t.next_offset,
                    t.commit,
                )
            })
            .collect()
    }

    /// Let END_TRANSACTION requests take the fast path (the op topic exists, ACL is off).
    fn allow_end_transaction(&self) {
        if let Some(f) = self.inner.fast_send() {
            f.end_transaction().allow();
        }
    }

    /// Claim the right to decide half offset `half_offset`: False if the fast path decided it
    /// (or it is below the floor). True without a fast path.
    fn tx_claim(&self, half_offset: i64) -> bool {
        self.inner
            .fast_send()
            .is_none_or(|f| f.end_transaction().claim(half_offset))
    }

    /// Give back a claim whose decision was not stored.
    fn tx_release(&self, half_offset: i64) {
        if let Some(f) = self.inner.fast_send() {
            f.end_transaction().release(half_offset);
        }
    }

    /// Every half offset below `floor` is settled: the claims below it are dropped.
    fn tx_floor(&self, floor: i64) {
        if let Some(f) = self.inner.fast_send() {
            f.end_transaction().set_floor(floor);
        }
    }

    /// `(commits, rollbacks, commits stored without their op record, claims held)` of the
    /// END_TRANSACTION fast path.
    fn end_transaction_stats(&self) -> (u64, u64, u64, usize) {
        self.inner
            .fast_send()
            .map_or((0, 0, 0, 0), |f| f.end_transaction().stats())
    }

    /// Times the network thread woke up with events to handle.
    fn wakeups(&self) -> u64 {
        self.inner.wakeups()
    }

    /// Milliseconds the network thread spent polling for requests instead of sleeping.
    fn spun_ms(&self) -> u64 {
        self.inner.spun().as_millis() as u64
    }

    /// Messages stored by the fast path.
    fn fast_puts(&self) -> u64 {
        self.inner.fast_send().map(|f| f.puts()).unwrap_or(0)
    }

    /// Batches whose own (batch-level) UNIQ_KEY the fast path dropped, each message keeping
    /// its own.
    fn fast_batch_uniq_keys_dropped(&self) -> u64 {
        self.inner
            .fast_send()
            .map(|f| f.batch_uniq_keys_dropped())
            .unwrap_or(0)
    }

    /// `(taken, messages, {reason: declined})`: send requests the fast path answered, the
    /// messages it stored, and the send requests it left to Python per reason (every reason
    /// listed); zeros before `enable_fast_send`.
    fn fast_send_stats(&self) -> (u64, u64, Vec<(&'static str, u64)>) {
        let st = self
            .inner
            .fast_send()
            .map(|f| f.stats())
            .unwrap_or_else(|| Stats {
                declined: Decline::ALL.iter().map(|d| (d.name(), 0)).collect(),
                ..Stats::default()
            });
        (st.taken, st.messages, st.declined)
    }

    /// `(topics, latency)`: per topic the fast path was allowed to take, `(topic, message_type,
    /// messages, bytes, sizes)` it stored (`normal`; `transaction`: half messages, once any) (bytes and sizes of the CommitLog records; `sizes` counts per
    /// size bucket of `SIZE_BOUNDS`, then larger, not cumulative); per request code and response
    /// code it answered, `(code, response, buckets, sum_us, long_polling)` (answers per bucket
    /// of `LATENCY_BOUNDS_MS`, then slower; `long_polling`: held pulls' answers, their wait
    /// included); empty before `enable_fast_send`.
    #[allow(clippy::type_complexity)]
    fn fast_send_metrics(
        &self,
    ) -> (
        Vec<(String, &'static str, u64, u64, Vec<u64>)>,
        Vec<(i32, i32, Vec<u64>, u64, bool)>,
    ) {
        let m = self
            .inner
            .fast_send()
            .map(|f| f.metrics())
            .unwrap_or_default();
        (
            m.topics
                .into_iter()
                .map(|t| {
                    (
                        t.topic,
                        t.message_type,
                        t.messages,
                        t.bytes,
                        t.sizes.to_vec(),
                    )
                })
                .collect(),
            m.latency
                .into_iter()
                .map(|l| {
                    (
                        l.code,
                        l.response,
                        l.buckets.to_vec(),
                        l.sum_us,
                        l.long_polling,
                    )
                })
                .collect(),
        )
    }

    /// Close every connection and stop the thread.
    fn shutdown(&self, py: Python<'_>) {
        let server = &self.inner;
        py.detach(|| server.shutdown());
    }
}

/// The gRPC port's front: TLS and plaintext clients on `host:port`, each connection passed on in
/// plain text to the abstract Unix socket `upstream` (grpcio's `unix-abstract:<upstream>`). `tls`: `(mode, cert_path, key_path,
/// trust_cert_path, need_client_auth)` as for `NetServer`; `None`: permissive with a
/// certificate made now for `names` (RocketMQ's TLS test mode).
#[pyclass(frozen, module = "rmq._store")]
struct TlsFront {
    inner: std::sync::Mutex<Option<Front>>,
    port: u16,
    fast: Arc<FastSends>,
}

#[pymethods]
impl TlsFront {
    #[new]
    #[pyo3(signature = (host, port, upstream, tls = None, names = Vec::new()))]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        upstream: &str,
        tls: Option<TlsArgs>,
        names: Vec<String>,
    ) -> PyResult<Self> {
        let server = match tls.as_ref() {
            Some(args) => tls_server(args)?,
            None => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                py.detach(|| TlsServer::self_signed(TlsMode::Permissive, &names))
                    .map_err(PyValueError::new_err)?
            }
        };
        let front = py
            .detach(|| Front::start(host, port, upstream, server))
            .map_err(|e| PyOSError::new_err(format!("cannot listen on {host}:{port}: {e}")))?;
        let port = front.local_addr().port();
        let fast = front.fast_sends();
        Ok(TlsFront {
            inner: std::sync::Mutex::new(Some(front)),
            port,
            fast,
        })
    }

    /// The bound port.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// `{"tls": n, "plain": n, "refused": n, "open": n}`: connections served so far, open now.
    fn stats(&self) -> HashMap<&'static str, u64> {
        let s = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Front::stats)
            .unwrap_or_default();
        HashMap::from([
            ("tls", s.tls),
            ("plain", s.plain),
            ("refused", s.refused),
            ("open", s.open),
        ])
    }

    /// Refusals since the last call, each naming the peer and the cause.
    fn take_refusals(&self) -> Vec<String> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Front::take_refusals)
            .unwrap_or_default()
    }

    /// `"host:port"` of the client behind the front's upstream connection bound to the abstract
    /// name `name` (the gRPC server's peer `unix-abstract:<name>`), or `None`.
    fn peer_of(&self, name: &str) -> Option<String> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|f| f.peer_of(name))
            .map(|a| a.to_string())
    }

    /// Serve SendMessage calls of plain messages in the front from now on (`on`), refusing none
    /// but leaving to the endpoint every message with a user property in `system_names`; or pass
    /// every call on.
    fn enable_sends(&self, on: bool, system_names: Vec<String>) {
        self.fast.enable(on, system_names);
    }

    /// The route of `topic`: its writable queues as `(broker_name, queue_id, master_addr)`, in
    /// the order sends take them, and the master of each broker group, `{broker_name: addr}`
    /// (both empty: forgotten, the topic's calls are passed on).
    fn route_sends(
        &self,
        topic: &str,
        queues: Vec<(String, i32, String)>,
        masters: HashMap<String, String>,
    ) {
        let queues = queues
            .into_iter()
            .map(|(broker_name, queue_id, addr)| WriteQueue {
                broker_name,
                queue_id,
                addr,
            })
            .collect();
        self.fast.set_topic(topic, queues);
        self.fast.set_masters(topic, masters);
    }

    /// The consumers the endpoint knows now, `{client_id: (fifo, max_attempts, lite)}`, and the
    /// property names a consumer is not shown among the user properties.
    fn set_consumers(&self, clients: HashMap<String, (bool, i32, bool)>, hidden: Vec<String>) {
        let clients = clients
            .into_iter()
            .map(|(id, (fifo, max_attempts, lite))| {
                let facts = ClientFacts {
                    fifo,
                    max_attempts,
                    lite,
                };
                (id, facts)
            })
            .collect();
        self.fast.set_clients(clients);
        self.fast.set_hidden_names(hidden);
    }

    /// Messages the front's receives found delivered as often as their consumer allows, since the
    /// last call: `(group, topic, receipt_handle, message_id)` each, for the dead-letter queue.
    fn take_dead_letters(&self) -> Vec<(String, String, String, String)> {
        self.fast
            .take_dead_letters()
            .into_iter()
            .map(|d| (d.group, d.topic, d.receipt_handle, d.message_id))
            .collect()
    }

    /// Calls the front answered itself and passed on: `served`, `passed_on` (SendMessage),
    /// `receive_served`, `receive_passed_on`, `ack_served`, `ack_passed_on`; `topics` it has
    /// routes of.
    fn send_stats(&self) -> HashMap<&'static str, u64> {
        let f = &self.fast;
        HashMap::from([
            ("served", f.served.load(Ordering::Relaxed)),
            ("passed_on", f.passed_on.load(Ordering::Relaxed)),
            ("receive_served", f.receives.served.load(Ordering::Relaxed)),
            (
                "receive_passed_on",
                f.receives.passed_on.load(Ordering::Relaxed),
            ),
            ("ack_served", f.acks.served.load(Ordering::Relaxed)),
            ("ack_passed_on", f.acks.passed_on.load(Ordering::Relaxed)),
            ("topics", f.topics() as u64),
        ])
    }

    /// Per RPC and status code name (`ok`...) of the calls the front answered: the count per
    /// `rocketmq_rpc_latency` bucket, then the sum in milliseconds.
    fn send_latency(&self) -> Vec<(&'static str, String, Vec<f64>)> {
        self.fast.latency_rows()
    }

    /// Stop listening and close every connection (idempotent).
    fn close(&self, py: Python<'_>) {
        let front = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut f) = front {
            py.detach(move || f.stop());
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NetServer>()?;
    m.add_class::<TlsFront>()?;
    m.add("SIZE_BOUNDS", rmq_net::metrics::SIZE_BOUNDS.to_vec())?;
    m.add(
        "LATENCY_BOUNDS_MS",
        rmq_net::metrics::LATENCY_BOUNDS_MS.to_vec(),
    )?;
    Ok(())
}
