//! Drives `rocketmq-client-rust` (crates.io) against a broker for rmq's compatibility tests.
//!
//! Usage: `rmq-rust-client-driver SCENARIO -namesrv ADDR -topic T -group G [-count N] [-timeout S]`
//!
//! The same scenarios, arguments and JSON result as the Go driver (`tests/clients/go/main.go`): each one
//! produces what it consumes and prints one JSON object on the last line of stdout.
//!
//! * `send`: sync send N messages, tags TagA/TagB cycled, keys "k<i> kk<i>", property seq=<i>
//! * `clustering`: send N, then two push consumers of one group (clustering) receive them
//! * `orderly`: send N to queue (i % 4) % queues, one orderly push consumer receives them
//! * `transaction`: i % 3 == 0 commit, 1 rollback, 2 unknown (check-back answers commit), then consume
//! * `delay`: send N with delay level 1, a push consumer receives them
//! * `retry`: a push consumer fails the first delivery of each message and receives the redeliveries

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
use rocketmq_client_rust::DefaultMQPushConsumer;
use rocketmq_client_rust::LocalTransactionState;
use rocketmq_client_rust::MQPushConsumer;
use rocketmq_client_rust::MessageListenerConcurrently;
use rocketmq_client_rust::MessageListenerOrderly;
use rocketmq_client_rust::TransactionListener;
use rocketmq_client_rust::TransactionMQProducer;
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::result::SendResult;
use rocketmq_runtime::RuntimeConfig;
use rocketmq_runtime::RuntimeOwner;
use serde_json::json;
use serde_json::Value;

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
            other => fail(&format!("unknown scenario {other}")),
        };
        let _ = d.rt.shutdown().await;
        out
    });
    match out {
        Ok(mut v) => {
            v["scenario"] = json!(scenario);
            emit(&v);
            // the client's background tasks are not all joined by shutdown; do not wait for them
            std::process::exit(0);
        }
        Err(e) => fail(&e.to_string()),
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
        let mut consumers = Vec::new();
        for name in names {
            let mut c = DefaultMQPushConsumer::builder(self.rt.clone())
                .client_config(client_config(&self.a, name))
                .consumer_group(self.a.group.as_str())
                .name_server_addr(self.a.namesrv.as_str())
                .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
                .client_rebalance(true)
                .build();
            c.subscribe(self.a.topic.as_str(), "*").await?;
            let listener = Listener {
                name: name.to_string(),
                collector: collector.clone(),
                fail_first,
            };
            if orderly {
                c.register_message_listener_orderly(listener);
            } else {
                c.register_message_listener_concurrently(listener);
            }
            c.start().await?;
            consumers.push(c);
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
    seen: Mutex<HashSet<usize>>,
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

    fn add(&self, m: Value, seq: usize, counts: bool) {
        self.received.lock().unwrap().push(m);
        if counts {
            let mut seen = self.seen.lock().unwrap();
            seen.insert(seq);
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

struct Listener {
    name: String,
    collector: Arc<Collector>,
    fail_first: bool,
}

impl Listener {
    /// Records the batch; true when it must be redelivered (a first delivery in the retry scenario).
    fn record(&self, msgs: &[&MessageExt]) -> bool {
        let mut retry = false;
        for m in msgs {
            let first = m.reconsume_times() == 0;
            let counts = !(self.fail_first && first);
            self.collector
                .add(message_json(m, &self.name), seq_of(&m.message), counts);
            retry |= !counts;
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
