//! Drives `rocketmq-client-rust` (crates.io) against a broker for rmq's compatibility tests.
//!
//! Usage: `rmq-rust-client-driver SCENARIO -namesrv ADDR -topic T -group G [-count N] [-timeout S]`
//!
//! The same scenarios, arguments and JSON result as the Go driver (`tests/clients/go/main.go`): each one
//! produces what it consumes and prints one JSON object on the last line of stdout.
//!
//! * `send`: sync send N messages, tags TagA/TagB cycled, keys "k<i> kk<i>", property seq=<i>
//! * `async`: the same N messages with `send_with_callback`, all in flight at once; each callback's result
//! * `oneway`: the same N messages with `send_oneway` (no results)
//! * `batch`: the same N messages in one `send_batch` (one result)
//! * `clustering`: send N, then two push consumers of one group (clustering) receive them
//! * `orderly`: send N to queue (i % 4) % queues, one orderly push consumer receives them
//! * `transaction`: i % 3 == 0 commit, 1 rollback, 2 unknown (check-back answers commit), then consume
//! * `delay`: send N with delay level 1, a push consumer receives them
//! * `retry`: a push consumer fails the first delivery of each message and receives the redeliveries
//! * `broadcasting`: send N, two push consumers of one group (broadcasting) each receive all of them
//! * `tag`: send N, a push consumer subscribed to "TagA" receives the TagA ones
//! * `sql92`: send N, a push consumer subscribed to the SQL92 expression "seq >= 2 AND seq < 5"
//! * `dlq`: send N, a push consumer with maxReconsumeTimes 2 fails every delivery; a second group then
//!   consumes `%DLQ%<group>` until all N arrived there
//! * `pull`: send N, a `DefaultMQPullConsumer` reads every queue from offset 0 to its end and sets each
//!   queue's offset with `update_consume_offset` (which 1.0.0 keeps in memory: see the test)

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use cheetah_string::CheetahString;
use rocketmq_client_rust::ClientConfig;
use rocketmq_client_rust::ClientError;
use rocketmq_client_rust::ClientResult;
use rocketmq_client_rust::ClientRuntime;
use rocketmq_client_rust::ClientRuntimeConfig;
use rocketmq_client_rust::ConsumeConcurrentlyContext;
use rocketmq_client_rust::ConsumeConcurrentlyStatus;
use rocketmq_client_rust::ConsumeOrderlyContext;
use rocketmq_client_rust::ConsumeOrderlyStatus;
use rocketmq_client_rust::DefaultMQProducer;
// the classic pull consumer is deprecated (kept for compatibility): it is what the `pull` scenario tests
#[allow(deprecated)]
use rocketmq_client_rust::DefaultMQPullConsumer;
use rocketmq_client_rust::DefaultMQPushConsumer;
use rocketmq_client_rust::LocalTransactionState;
use rocketmq_client_rust::MQPushConsumer;
use rocketmq_client_rust::MessageListenerConcurrently;
use rocketmq_client_rust::MessageListenerOrderly;
use rocketmq_client_rust::MessageSelector;
use rocketmq_client_rust::PullStatus;
use rocketmq_client_rust::TransactionListener;
use rocketmq_client_rust::TransactionMQProducer;
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::result::SendResult;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_runtime::RuntimeConfig;
use rocketmq_runtime::RuntimeOwner;
use serde_json::json;
use serde_json::Value;

const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(2);

struct Args {
    namesrv: String,
    topic: String,
    group: String,
    count: usize,
    timeout: Duration,
}

fn emit(v: &Value) {
    println!("{v}");
}

fn fail(msg: &str) -> ! {
    emit(&json!({ "error": msg }));
    std::process::exit(1);
}

fn parse_args() -> (String, Args) {
    let argv: Vec<String> = std::env::args().collect();
    if argv.len() < 2 {
        fail("usage: rmq-rust-client-driver SCENARIO -namesrv A -topic T -group G [-count N] [-timeout S]");
    }
    let mut a = Args {
        namesrv: String::new(),
        topic: String::new(),
        group: String::new(),
        count: 8,
        timeout: Duration::from_secs(60),
    };
    let mut it = argv[2..].iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| fail(&format!("{flag} needs a value")));
        match flag.as_str() {
            "-namesrv" => a.namesrv = value.clone(),
            "-topic" => a.topic = value.clone(),
            "-group" => a.group = value.clone(),
            "-count" => {
                a.count = value
                    .parse()
                    .unwrap_or_else(|_| fail("-count: not a number"))
            }
            "-timeout" => {
                let secs: f64 = value
                    .parse()
                    .unwrap_or_else(|_| fail("-timeout: not a number"));
                a.timeout = Duration::from_secs_f64(secs);
            }
            other => fail(&format!("unknown flag {other}")),
        }
    }
    if a.namesrv.is_empty() || a.topic.is_empty() || a.group.is_empty() {
        fail("-namesrv, -topic and -group are required");
    }
    (argv[1].clone(), a)
}

fn main() {
    let (scenario, a) = parse_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("tokio runtime: {e}")));
    let out = rt.block_on(async {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "rmq-driver".to_string(),
            ..Default::default()
        })
        .map_err(|e| ClientError::internal("plan runtime", e))?
        .build()
        .map_err(|e| ClientError::internal("build runtime", e))?;
        let telemetry = rocketmq_observability::install_global(
            &rocketmq_observability::TelemetryBootstrapConfig::default(),
        )
        .map_err(|e| ClientError::internal("telemetry", e))?;
        let client_runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            telemetry.handle(),
        )?;
        let d = Driver {
            a,
            rt: client_runtime,
        };
        let out = match scenario.as_str() {
            "send" => d.send().await,
            "clustering" => d.clustering().await,
            "orderly" => d.orderly().await,
            "transaction" => d.transaction().await,
            "delay" => d.delay().await,
            "retry" => d.retry().await,
            "async" => d.send_async().await,
            "oneway" => d.oneway().await,
            "batch" => d.batch().await,
            "broadcasting" => d.broadcasting().await,
            "tag" => {
                d.selected(MessageSelector::by_tag("TagA"), |i| i % 2 == 0)
                    .await
            }
            "sql92" => {
                d.selected(MessageSelector::by_sql("seq >= 2 AND seq < 5"), |i| {
                    (2..5).contains(&i)
                })
                .await
            }
            "dlq" => d.dlq().await,
            "pull" => d.pull().await,
            other => fail(&format!("unknown scenario {other}")),
        };
        // Bounded: after the classic pull consumer's shutdown, its lite pull tasks keep retrying (without
        // a name server) and the runtime's shutdown waits about 30 s for them.
        let drained = tokio::time::timeout(RUNTIME_SHUTDOWN, d.rt.shutdown())
            .await
            .is_ok();
        out.map(|mut v| {
            v["runtime_shutdown"] = json!(if drained { "done" } else { "timed out" });
            v
        })
    });
    match out {
        Ok(mut v) => {
            v["scenario"] = json!(scenario);
            emit(&v);
            // the client's background tasks are not all joined by shutdown; do not wait for them
            std::process::exit(0);
        }
        // with its sources: the Display of an internal error is only "Internal error"
        Err(e) => {
            let mut msg = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            fail(&msg)
        }
    }
}

// --- producing ---------------------------------------------------------------------------------------------

fn message(a: &Args, i: usize, delay_level: i32) -> Message {
    let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
    let mut b = Message::builder()
        .topic(a.topic.as_str())
        .tags(tag)
        .keys(vec![format!("k{i}"), format!("kk{i}")])
        .body(format!("{}#{i}", a.topic).into_bytes())
        .raw_property("seq", i.to_string())
        .unwrap_or_else(|e| fail(&e.to_string()));
    if delay_level > 0 {
        b = b.delay_level(delay_level);
    }
    b.build().unwrap_or_else(|e| fail(&e.to_string()))
}

fn send_json(i: usize, r: ClientResult<Option<SendResult>>) -> Value {
    match r {
        Ok(Some(r)) => {
            let (queue_id, broker) = r
                .message_queue
                .as_ref()
                .map(|q| (q.queue_id(), q.broker_name().to_string()))
                .unwrap_or((-1, String::new()));
            json!({
                "i": i,
                "status": r.send_status as i32,
                "msg_id": r.msg_id.as_ref().map(|s| s.to_string()),
                "offset_msg_id": r.offset_msg_id,
                "queue_id": queue_id,
                "queue_offset": r.queue_offset,
                "broker": broker,
            })
        }
        Ok(None) => json!({ "i": i, "error": "no send result" }),
        Err(e) => json!({ "i": i, "error": e.to_string() }),
    }
}

struct Driver {
    a: Args,
    rt: Arc<ClientRuntime>,
}

fn client_config(a: &Args, instance: &str) -> ClientConfig {
    let mut config = ClientConfig::builder()
        .namesrv_addr(a.namesrv.as_str())
        .instance_name(instance)
        .enable_vip_channel(false)
        .build()
        .unwrap_or_else(|e| fail(&e.to_string()));
    config.set_instance_name(CheetahString::from(instance));
    config
}

impl Driver {
    async fn producer(&self) -> ClientResult<DefaultMQProducer> {
        let mut p = DefaultMQProducer::builder(self.rt.clone())
            .client_config(client_config(&self.a, "p"))
            .producer_group(format!("{}_P", self.a.group))
            .name_server_addr(self.a.namesrv.as_str())
            .build();
        p.start().await?;
        Ok(p)
    }

    async fn send_all(&self, delay_level: i32, by_shard: bool) -> ClientResult<Vec<Value>> {
        let mut p = self.producer().await?;
        let mut sent = Vec::new();
        for i in 0..self.a.count {
            let msg = message(&self.a, i, delay_level);
            let r = if by_shard {
                let select = |mqs: &[MessageQueue], _m: &Message, shard: &usize| {
                    mqs.get(shard % mqs.len()).cloned()
                };
                p.send_with_selector(msg, select, i % 4).await
            } else {
                p.send_with_timeout(msg, 10_000).await
            };
            sent.push(send_json(i, r));
        }
        p.shutdown().await;
        Ok(sent)
    }

    async fn send(&self) -> ClientResult<Value> {
        Ok(json!({ "sent": self.send_all(0, false).await? }))
    }

    async fn consume(
        &self,
        names: &[&str],
        collector: Arc<Collector>,
        orderly: bool,
        fail_first: bool,
    ) -> ClientResult<Value> {
        let policy = if fail_first {
            Policy::FailFirst
        } else {
            Policy::Succeed
        };
        let spec = Spec::new(&self.a.group, &self.a.topic, policy);
        self.consume_with(names, collector, orderly, &spec).await
    }

    async fn start_consumer(
        &self,
        name: &str,
        collector: Arc<Collector>,
        orderly: bool,
        spec: &Spec,
    ) -> ClientResult<DefaultMQPushConsumer> {
        let mut builder = DefaultMQPushConsumer::builder(self.rt.clone())
            .client_config(client_config(&self.a, name))
            .consumer_group(spec.group.as_str())
            .name_server_addr(self.a.namesrv.as_str())
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .message_model(spec.model)
            .client_rebalance(true);
        if let Some(max) = spec.max_reconsume_times {
            builder = builder.max_reconsume_times(max);
        }
        let mut c = builder.build();
        c.subscribe_with_selector(spec.topic.as_str(), Some(spec.selector.clone()))
            .await?;
        let listener = Listener {
            name: name.to_string(),
            collector,
            policy: spec.policy,
            want: spec.want,
            per_consumer: spec.model == MessageModel::Broadcasting,
        };
        if orderly {
            c.register_message_listener_orderly(listener);
        } else {
            c.register_message_listener_concurrently(listener);
        }
        c.start().await?;
        Ok(c)
    }

    async fn consume_with(
        &self,
        names: &[&str],
        collector: Arc<Collector>,
        orderly: bool,
        spec: &Spec,
    ) -> ClientResult<Value> {
        let mut consumers = Vec::new();
        for name in names {
            consumers.push(
                self.start_consumer(name, collector.clone(), orderly, spec)
                    .await?,
            );
        }
        let complete = collector.wait(self.a.timeout).await;
        for mut c in consumers {
            c.shutdown().await;
        }
        let received = collector.received.lock().unwrap().clone();
        Ok(json!({ "received": received, "complete": complete }))
    }

    async fn clustering(&self) -> ClientResult<Value> {
        let sent = self.send_all(0, false).await?;
        let mut out = self
            .consume(&["c1", "c2"], Collector::new(self.a.count), false, false)
            .await?;
        out["sent"] = json!(sent);
        Ok(out)
    }

    async fn orderly(&self) -> ClientResult<Value> {
        let sent = self.send_all(0, true).await?;
        let mut out = self
            .consume(&["c1"], Collector::new(self.a.count), true, false)
            .await?;
        out["sent"] = json!(sent);
        Ok(out)
    }

    async fn delay(&self) -> ClientResult<Value> {
        let sent = self.send_all(1, false).await?;
        let mut out = self
            .consume(&["c1"], Collector::new(self.a.count), false, false)
            .await?;
        out["sent"] = json!(sent);
        Ok(out)
    }

    async fn retry(&self) -> ClientResult<Value> {
        let sent = self.send_all(0, false).await?;
        let mut out = self
            .consume(&["c1"], Collector::new(self.a.count), false, true)
            .await?;
        out["sent"] = json!(sent);
        Ok(out)
    }

    async fn transaction(&self) -> ClientResult<Value> {
        let checks = Arc::new(Mutex::new(Vec::<String>::new()));
        let mut p = TransactionMQProducer::builder(self.rt.clone())
            .client_config(client_config(&self.a, "tp"))
            .producer_group(format!("{}_P", self.a.group))
            .name_server_addr(self.a.namesrv.as_str())
            .topics(vec![self.a.topic.clone()])
            .transaction_listener(TxListener {
                checks: checks.clone(),
            })
            .build();
        p.start().await?;
        let mut sent = Vec::new();
        let mut want = 0;
        for i in 0..self.a.count {
            match p
                .send_message_in_transaction::<(), _>(message(&self.a, i, 0), None)
                .await
            {
                Ok(r) => {
                    let mut entry = send_json(i, Ok(r.send_result.clone()));
                    entry["local_state"] = json!(format!("{:?}", r.local_transaction_state));
                    sent.push(entry);
                    if i % 3 != 1 {
                        want += 1;
                    }
                }
                Err(e) => sent.push(json!({ "i": i, "error": e.to_string() })),
            }
        }
        let mut out = self
            .consume(&["c1"], Collector::new(want), false, false)
            .await?;
        p.shutdown().await;
        out["checks"] = json!(checks.lock().unwrap().clone());
        out["sent"] = json!(sent);
        Ok(out)
    }
}

struct TxListener {
    checks: Arc<Mutex<Vec<String>>>,
}

fn seq_of(m: &dyn MessageTrait) -> usize {
    m.property(&CheetahString::from_static_str("seq"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX)
}

impl TransactionListener for TxListener {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        match seq_of(msg) % 3 {
            0 => LocalTransactionState::CommitMessage,
            1 => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checks.lock().unwrap().push(seq_of(msg).to_string());
        LocalTransactionState::CommitMessage
    }
}

// --- consuming ---------------------------------------------------------------------------------------------

struct Collector {
    received: Mutex<Vec<Value>>,
    seen: Mutex<HashSet<String>>,
    want: usize,
    notify: tokio::sync::Notify,
}

impl Collector {
    fn new(want: usize) -> Arc<Self> {
        Arc::new(Self {
            received: Mutex::new(Vec::new()),
            seen: Mutex::new(HashSet::new()),
            want,
            notify: tokio::sync::Notify::new(),
        })
    }

    fn add(&self, m: Value, key: String, counts: bool) {
        self.received.lock().unwrap().push(m);
        if counts {
            let mut seen = self.seen.lock().unwrap();
            seen.insert(key);
            if seen.len() >= self.want {
                self.notify.notify_one();
            }
        }
    }

    async fn wait(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.seen.lock().unwrap().len() >= self.want {
                return true;
            }
            let step = tokio::time::Instant::now() + Duration::from_millis(200);
            if tokio::time::timeout_at(step.min(deadline), self.notify.notified())
                .await
                .is_err()
                && tokio::time::Instant::now() >= deadline
            {
                return self.seen.lock().unwrap().len() >= self.want;
            }
        }
    }
}

fn message_json(m: &MessageExt, consumer: &str) -> Value {
    let props: serde_json::Map<String, Value> = m
        .message
        .properties()
        .as_map()
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v.to_string())))
        .collect();
    json!({
        "consumer": consumer,
        "topic": m.topic().to_string(),
        "body": String::from_utf8_lossy(m.message.body_slice()),
        "tags": m.message.tags(),
        "keys": m.message.keys().map(|k| k.join(" ")),
        "msg_id": m.msg_id().to_string(),
        "queue_id": m.queue_id(),
        "queue_offset": m.queue_offset(),
        "reconsume_times": m.reconsume_times(),
        "born_timestamp": m.born_timestamp(),
        "store_timestamp": m.store_timestamp(),
        "props": props,
    })
}

/// What a listener answers.
#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Succeed,
    /// Fail the first delivery of each message (a delivery counts once redelivered).
    FailFirst,
    /// Fail every delivery (a delivery counts once its reconsume times reach the given maximum).
    FailAll(i32),
}

/// One consumer group's subscription and the listener's behaviour.
struct Spec {
    group: String,
    topic: String,
    selector: MessageSelector,
    model: MessageModel,
    max_reconsume_times: Option<i32>,
    policy: Policy,
    /// Which seqs count toward completion (all other deliveries are still recorded).
    want: fn(usize) -> bool,
}

impl Spec {
    fn new(group: &str, topic: &str, policy: Policy) -> Self {
        Self {
            group: group.to_string(),
            topic: topic.to_string(),
            selector: MessageSelector::by_tag("*"),
            model: MessageModel::Clustering,
            max_reconsume_times: None,
            policy,
            want: |_| true,
        }
    }
}

struct Listener {
    name: String,
    collector: Arc<Collector>,
    policy: Policy,
    want: fn(usize) -> bool,
    /// Broadcasting: completion counts each (consumer, seq) pair.
    per_consumer: bool,
}

impl Listener {
    /// Records the batch; true when it must be redelivered.
    fn record(&self, msgs: &[&MessageExt]) -> bool {
        let mut retry = false;
        for m in msgs {
            let seq = seq_of(&m.message);
            let (counts, fail) = match self.policy {
                Policy::Succeed => ((self.want)(seq), false),
                Policy::FailFirst => {
                    let first = m.reconsume_times() == 0;
                    (!first, first)
                }
                Policy::FailAll(max) => (m.reconsume_times() >= max, true),
            };
            let key = if self.per_consumer {
                format!("{}/{seq}", self.name)
            } else {
                seq.to_string()
            };
            self.collector.add(message_json(m, &self.name), key, counts);
            retry |= fail;
        }
        retry
    }
}

impl MessageListenerConcurrently for Listener {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> ClientResult<ConsumeConcurrentlyStatus> {
        if self.record(msgs) {
            Ok(ConsumeConcurrentlyStatus::ReconsumeLater)
        } else {
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        }
    }
}

impl MessageListenerOrderly for Listener {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &mut ConsumeOrderlyContext,
    ) -> ClientResult<ConsumeOrderlyStatus> {
        self.record(msgs);
        Ok(ConsumeOrderlyStatus::Success)
    }
}

// --- more send modes and consumers -------------------------------------------------------------------------

const DLQ_MAX_RECONSUME_TIMES: i32 = 2;

impl Driver {
    async fn send_async(&self) -> ClientResult<Value> {
        let mut p = self.producer().await?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Value)>();
        let mut sent = vec![Value::Null; self.a.count];
        for (i, slot) in sent.iter_mut().enumerate() {
            let tx = tx.clone();
            let callback = move |r: Option<&SendResult>, e: Option<&ClientError>| {
                let entry = match (r, e) {
                    (Some(r), _) => send_json(i, Ok(Some(r.clone()))),
                    (None, Some(e)) => json!({ "i": i, "error": e.to_string() }),
                    (None, None) => json!({ "i": i, "error": "callback without result or error" }),
                };
                let _ = tx.send((i, entry));
            };
            if let Err(e) = p
                .send_with_callback_timeout(message(&self.a, i, 0), callback, 10_000)
                .await
            {
                *slot = json!({ "i": i, "error": e.to_string() });
            }
        }
        drop(tx);
        let deadline = tokio::time::Instant::now() + self.a.timeout;
        while sent.iter().any(Value::is_null) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((i, entry))) => sent[i] = entry,
                Ok(None) => break, // every callback dropped
                Err(_) => break,
            }
        }
        p.shutdown().await;
        if sent.iter().any(Value::is_null) {
            return Err(ClientError::internal(
                "async send",
                std::io::Error::other(format!("callbacks missing: {sent:?}")),
            ));
        }
        Ok(json!({ "sent": sent }))
    }

    async fn oneway(&self) -> ClientResult<Value> {
        let mut p = self.producer().await?;
        let mut oneway = Vec::new();
        for i in 0..self.a.count {
            match p.send_oneway(message(&self.a, i, 0)).await {
                Ok(()) => oneway.push(json!({ "i": i })),
                Err(e) => oneway.push(json!({ "i": i, "error": e.to_string() })),
            }
        }
        p.shutdown().await;
        Ok(json!({ "oneway": oneway }))
    }

    async fn batch(&self) -> ClientResult<Value> {
        let mut p = self.producer().await?;
        let msgs: Vec<Message> = (0..self.a.count).map(|i| message(&self.a, i, 0)).collect();
        let r = p.send_batch_with_timeout(msgs, 10_000).await;
        p.shutdown().await;
        let mut entry = send_json(0, r.map(Some));
        if let Some(ids) = entry["msg_id"].as_str().map(str::to_string) {
            entry["msg_ids"] = json!(ids.split(',').collect::<Vec<_>>());
        }
        Ok(json!({ "batch": entry }))
    }

    async fn broadcasting(&self) -> ClientResult<Value> {
        let sent = self.send_all(0, false).await?;
        let mut spec = Spec::new(&self.a.group, &self.a.topic, Policy::Succeed);
        spec.model = MessageModel::Broadcasting;
        let collector = Collector::new(2 * self.a.count); // keyed by consumer and seq
        let mut out = self
            .consume_with(&["c1", "c2"], collector, false, &spec)
            .await?;
        out["sent"] = json!(sent);
        Ok(out)
    }

    /// One clustering consumer subscribed with `selector`; the seqs `want` accepts must all arrive.
    async fn selected(
        &self,
        selector: MessageSelector,
        want: fn(usize) -> bool,
    ) -> ClientResult<Value> {
        let sent = self.send_all(0, false).await?;
        let mut spec = Spec::new(&self.a.group, &self.a.topic, Policy::Succeed);
        spec.selector = selector;
        spec.want = want;
        let n = (0..self.a.count).filter(|&i| want(i)).count();
        let mut out = self
            .consume_with(&["c1"], Collector::new(n), false, &spec)
            .await?;
        out["sent"] = json!(sent);
        Ok(out)
    }

    async fn dlq(&self) -> ClientResult<Value> {
        let sent = self.send_all(0, false).await?;
        let deadline = tokio::time::Instant::now() + self.a.timeout;
        let mut spec = Spec::new(
            &self.a.group,
            &self.a.topic,
            Policy::FailAll(DLQ_MAX_RECONSUME_TIMES),
        );
        spec.max_reconsume_times = Some(DLQ_MAX_RECONSUME_TIMES);
        let failing = Collector::new(self.a.count); // complete once each message had its last delivery
        let mut c = self
            .start_consumer("c1", failing.clone(), false, &spec)
            .await?;
        let complete = failing.wait(self.a.timeout).await;
        // the dead letters: %DLQ%<group> exists once the first one is stored, read it with a second group
        let dead = Collector::new(self.a.count);
        let reader_spec = Spec::new(
            &format!("{}_dlq", self.a.group),
            &format!("%DLQ%{}", self.a.group),
            Policy::Succeed,
        );
        let mut reader = None;
        let mut attempt = 0;
        while complete && reader.is_none() && tokio::time::Instant::now() < deadline {
            match self
                .start_consumer(&format!("d{attempt}"), dead.clone(), false, &reader_spec)
                .await
            {
                Ok(r) => reader = Some(r),
                // the topic's route appears with its first message
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
            attempt += 1;
        }
        let mut dead_complete = false;
        if let Some(mut r) = reader {
            dead_complete = dead
                .wait(deadline.saturating_duration_since(tokio::time::Instant::now()))
                .await;
            r.shutdown().await;
        }
        c.shutdown().await;
        let received = failing.received.lock().unwrap().clone();
        let dead_received = dead.received.lock().unwrap().clone();
        Ok(json!({
            "received": received,
            "dead": dead_received,
            "complete": complete && dead_complete,
            "sent": sent,
        }))
    }

    #[allow(deprecated)]
    async fn pull(&self) -> ClientResult<Value> {
        let sent = self.send_all(0, false).await?;
        let c = DefaultMQPullConsumer::builder(self.rt.clone())
            .consumer_group(self.a.group.as_str())
            .name_server_addr(self.a.namesrv.as_str())
            .build()?;
        c.start().await?;
        let collector = Collector::new(self.a.count);
        let mut offsets = serde_json::Map::new();
        let deadline = tokio::time::Instant::now() + self.a.timeout;
        for mq in c.fetch_subscribe_message_queues(&self.a.topic).await? {
            let mut offset = 0i64;
            while tokio::time::Instant::now() < deadline {
                // the broker holds a pull at the end of a queue: stop before it
                let r = c.pull(&mq, "*", offset, 4).await?;
                if *r.pull_status() == PullStatus::NoNewMsg && offset >= r.max_offset() as i64 {
                    // an empty queue: the producer's queue index is per thread (ThreadLocalIndex,
                    // random start, as in Java's client) and its sends resume on whichever runtime
                    // worker, so 6 sends need not reach all 4 queues (3/2/1/0 seen here)
                    break;
                }
                if *r.pull_status() != PullStatus::Found {
                    return Err(ClientError::internal(
                        "pull",
                        std::io::Error::other(format!(
                            "queue {} offset {offset}: {:?}",
                            mq.queue_id(),
                            r.pull_status()
                        )),
                    ));
                }
                for m in r.msg_found_list().unwrap_or_default() {
                    collector.add(
                        message_json(m, "pull"),
                        seq_of(&m.message).to_string(),
                        true,
                    );
                }
                offset = r.next_begin_offset() as i64;
                if r.next_begin_offset() >= r.max_offset() {
                    break;
                }
            }
            offsets.insert(mq.queue_id().to_string(), json!(offset));
            c.update_consume_offset(&mq, offset).await?;
        }
        // Bounded: the shutdown waits 5 s for each queue's lite pull task (started by the subscription
        // the classic pull registers), which does not stop when asked ("lite pull task shutdown report
        // is unhealthy": timed_out 1, aborted 1).
        let shutdown = match tokio::time::timeout(RUNTIME_SHUTDOWN, c.shutdown()).await {
            Ok(r) => r.map(|()| "done")?,
            Err(_) => "timed out",
        };
        let complete = collector.wait(Duration::ZERO).await;
        let received = collector.received.lock().unwrap().clone();
        Ok(json!({
            "received": received,
            "complete": complete,
            "offsets": offsets,
            "consumer_shutdown": shutdown,
            "sent": sent,
        }))
    }
}
