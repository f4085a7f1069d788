// Drives github.com/apache/rocketmq-client-go/v2 against a broker for rmq's compatibility tests.
//
// Usage: rmq-go-driver SCENARIO -namesrv ADDR -topic T -group G [-count N] [-timeout S]
//
// Each scenario is self-contained (it produces what it consumes) and prints exactly one JSON object on the
// last line of stdout; the client's own logs go to stderr. Scenarios:
//
//	send         sync send N messages, tags TagA/TagB cycled, keys "k<i> kk<i>", property seq=<i>
//	async        the same N messages sent with SendAsync, all in flight at once; each callback's result
//	oneway       the same N messages sent with SendOneWay (no results)
//	batch        the same N messages in one SendSync batch (one result, N comma-separated message ids)
//	clustering   send N, then two push consumers of one group (clustering) receive them
//	orderly      send N with sharding key "s<i%4>" (hash selector), one orderly push consumer receives them
//	transaction  N transactional messages: i%3 == 0 commit, 1 rollback, 2 unknown (check-back answers commit);
//	             a push consumer then receives what was committed
//	delay        send N with delay level 1, a push consumer receives them
//	retry        send N, a push consumer fails the first delivery of each, receives the redeliveries
//	broadcasting send N, two push consumers of one group (broadcasting) each receive all of them
//	tag          send N, a push consumer subscribed to "TagA" receives the TagA ones
//	sql92        send N, a push consumer subscribed to the SQL92 expression "seq >= 2 AND seq < 5"
//	dlq          send N, a push consumer with maxReconsumeTimes 2 fails every delivery; a second group
//	             then consumes %DLQ%<group> until all N arrived there
//	pull         send N, a pull consumer reads them (Poll) and stores the offsets (ACK, PersistOffset)
//
// Consumers start from the first offset and stop once every expected seq arrived or -timeout passes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

type args struct {
	namesrv string
	topic   string
	group   string
	count   int
	timeout time.Duration
}

type result map[string]interface{}

func main() {
	if len(os.Args) < 2 {
		fail("usage: rmq-go-driver SCENARIO -namesrv A -topic T -group G [-count N] [-timeout S]")
	}
	scenario := os.Args[1]
	fs := flag.NewFlagSet(scenario, flag.ExitOnError)
	a := args{}
	fs.StringVar(&a.namesrv, "namesrv", "", "name server address")
	fs.StringVar(&a.topic, "topic", "", "topic")
	fs.StringVar(&a.group, "group", "", "producer/consumer group")
	fs.IntVar(&a.count, "count", 8, "messages")
	timeout := fs.Float64("timeout", 60, "seconds to wait for deliveries")
	_ = fs.Parse(os.Args[2:])
	a.timeout = time.Duration(*timeout * float64(time.Second))
	if a.namesrv == "" || a.topic == "" || a.group == "" {
		fail("-namesrv, -topic and -group are required")
	}
	rlog.SetLogLevel("warn")

	var out result
	var err error
	switch scenario {
	case "send":
		out, err = scenarioSend(a)
	case "clustering":
		out, err = scenarioClustering(a)
	case "orderly":
		out, err = scenarioOrderly(a)
	case "transaction":
		out, err = scenarioTransaction(a)
	case "delay":
		out, err = scenarioDelay(a)
	case "retry":
		out, err = scenarioRetry(a)
	case "async":
		out, err = scenarioAsync(a)
	case "oneway":
		out, err = scenarioOneway(a)
	case "batch":
		out, err = scenarioBatch(a)
	case "broadcasting":
		out, err = scenarioBroadcasting(a)
	case "tag":
		out, err = scenarioTag(a)
	case "sql92":
		out, err = scenarioSQL92(a)
	case "dlq":
		out, err = scenarioDLQ(a)
	case "pull":
		out, err = scenarioPull(a)
	default:
		fail("unknown scenario " + scenario)
	}
	if err != nil {
		fail(err.Error())
	}
	out["scenario"] = scenario
	emit(out)
}

func emit(v interface{}) {
	line, _ := json.Marshal(v)
	fmt.Println(string(line))
}

func fail(msg string) {
	emit(result{"error": msg})
	os.Exit(1)
}

// --- producing ---------------------------------------------------------------------------------------------

func message(a args, i int) *primitive.Message {
	tag := "TagA"
	if i%2 == 1 {
		tag = "TagB"
	}
	msg := primitive.NewMessage(a.topic, []byte(fmt.Sprintf("%s#%d", a.topic, i)))
	msg.WithTag(tag)
	msg.WithKeys([]string{fmt.Sprintf("k%d", i), fmt.Sprintf("kk%d", i)})
	msg.WithProperty("seq", strconv.Itoa(i))
	return msg
}

func sendResultJSON(i int, r *primitive.SendResult, err error) result {
	if err != nil {
		return result{"i": i, "error": err.Error()}
	}
	out := result{
		"i":             i,
		"status":        int(r.Status),
		"msg_id":        r.MsgID,
		"offset_msg_id": r.OffsetMsgID,
		"queue_offset":  r.QueueOffset,
	}
	if r.MessageQueue != nil {
		out["queue_id"] = r.MessageQueue.QueueId
		out["broker"] = r.MessageQueue.BrokerName
	}
	return out
}

func newProducer(a args, opts ...producer.Option) (rocketmq.Producer, error) {
	base := []producer.Option{
		producer.WithNameServer([]string{a.namesrv}),
		producer.WithGroupName(a.group + "_P"),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10 * time.Second),
	}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

func sendAll(a args, p rocketmq.Producer, decorate func(int, *primitive.Message)) []result {
	results := make([]result, 0, a.count)
	for i := 0; i < a.count; i++ {
		msg := message(a, i)
		if decorate != nil {
			decorate(i, msg)
		}
		r, err := p.SendSync(context.Background(), msg)
		results = append(results, sendResultJSON(i, r, err))
	}
	return results
}

func scenarioSend(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	return result{"sent": sendAll(a, p, nil)}, nil
}

// --- consuming ---------------------------------------------------------------------------------------------

func messageJSON(m *primitive.MessageExt, consumerName string) result {
	props := map[string]string{}
	for k, v := range m.GetProperties() {
		props[k] = v
	}
	queueID := -1
	if m.Queue != nil {
		queueID = m.Queue.QueueId
	}
	return result{
		"consumer":        consumerName,
		"topic":           m.Topic,
		"body":            string(m.Body),
		"tags":            m.GetTags(),
		"keys":            m.GetKeys(),
		"msg_id":          m.MsgId,
		"queue_id":        queueID,
		"queue_offset":    m.QueueOffset,
		"reconsume_times": m.ReconsumeTimes,
		"born_timestamp":  m.BornTimestamp,
		"store_timestamp": m.StoreTimestamp,
		"props":           props,
	}
}

// collector gathers deliveries until every seq in want arrived (per predicate) or the deadline passes.
type collector struct {
	mu       sync.Mutex
	received []result
	seen     map[string]bool
	want     int
	done     chan struct{}
	closed   bool
}

func newCollector(want int) *collector {
	return &collector{seen: map[string]bool{}, want: want, done: make(chan struct{})}
}

// add records a delivery; counts reports whether it counts toward completion (keyed by seq).
func (c *collector) add(m result, seq string, counts bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received = append(c.received, m)
	if counts {
		c.seen[seq] = true
	}
	if len(c.seen) >= c.want && !c.closed {
		c.closed = true
		close(c.done)
	}
}

func (c *collector) wait(timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (c *collector) complete() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *collector) snapshot() []result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]result(nil), c.received...)
}

type listener func(ctx context.Context, name string, msgs ...*primitive.MessageExt) consumer.ConsumeResult

func startConsumer(a args, name string, orderly bool, fn listener) (rocketmq.PushConsumer, error) {
	return startConsumerWith(a.namesrv, a.group, a.topic, name, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		fn, consumer.WithConsumerModel(consumer.Clustering), consumer.WithConsumerOrder(orderly))
}

// startConsumerWith starts a push consumer of group on topic from the first offset; opts come last.
func startConsumerWith(namesrv, group, topic, name string, sel consumer.MessageSelector, fn listener,
	opts ...consumer.Option) (rocketmq.PushConsumer, error) {
	base := []consumer.Option{
		consumer.WithNameServer([]string{namesrv}),
		consumer.WithGroupName(group),
		consumer.WithInstance(name),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	c, err := rocketmq.NewPushConsumer(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	err = c.Subscribe(topic, sel,
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return fn(ctx, name, msgs...), nil
		})
	if err != nil {
		return nil, err
	}
	return c, c.Start()
}

func collectAll(col *collector) listener {
	return func(_ context.Context, name string, msgs ...*primitive.MessageExt) consumer.ConsumeResult {
		for _, m := range msgs {
			col.add(messageJSON(m, name), m.GetProperty("seq"), true)
		}
		return consumer.ConsumeSuccess
	}
}

func consumeResult(col *collector, a args, names []string, orderly bool, fn listener) (result, error) {
	return consumeWith(col, a, names, func(name string) (rocketmq.PushConsumer, error) {
		return startConsumer(a, name, orderly, fn)
	})
}

// consumeWith starts one consumer per name, waits for the collector, shuts them down.
func consumeWith(col *collector, a args, names []string,
	start func(name string) (rocketmq.PushConsumer, error)) (result, error) {
	consumers := make([]rocketmq.PushConsumer, 0, len(names))
	for _, name := range names {
		c, err := start(name)
		if err != nil {
			return nil, err
		}
		consumers = append(consumers, c)
	}
	complete := col.wait(a.timeout)
	for _, c := range consumers {
		_ = c.Shutdown()
	}
	return result{"received": col.snapshot(), "complete": complete}, nil
}

func scenarioClustering(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	sent := sendAll(a, p, nil)
	_ = p.Shutdown()
	col := newCollector(a.count)
	out, err := consumeResult(col, a, []string{"c1", "c2"}, false, collectAll(col))
	if err != nil {
		return nil, err
	}
	out["sent"] = sent
	return out, nil
}

func scenarioOrderly(a args) (result, error) {
	p, err := newProducer(a, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		return nil, err
	}
	sent := sendAll(a, p, func(i int, m *primitive.Message) {
		m.WithShardingKey(fmt.Sprintf("s%d", i%4))
		m.WithProperty("shard", strconv.Itoa(i%4))
	})
	_ = p.Shutdown()
	col := newCollector(a.count)
	out, err := consumeResult(col, a, []string{"c1"}, true, collectAll(col))
	if err != nil {
		return nil, err
	}
	out["sent"] = sent
	return out, nil
}

type txListener struct {
	mu     sync.Mutex
	checks []string
}

func txState(seq string) primitive.LocalTransactionState {
	i, _ := strconv.Atoi(seq)
	switch i % 3 {
	case 0:
		return primitive.CommitMessageState
	case 1:
		return primitive.RollbackMessageState
	default:
		return primitive.UnknowState
	}
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	return txState(m.GetProperty("seq"))
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checks = append(l.checks, m.GetProperty("seq"))
	l.mu.Unlock()
	return primitive.CommitMessageState
}

func scenarioTransaction(a args) (result, error) {
	tl := &txListener{}
	p, err := rocketmq.NewTransactionProducer(tl,
		producer.WithNameServer([]string{a.namesrv}),
		producer.WithGroupName(a.group+"_P"),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10*time.Second),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	sent := make([]result, 0, a.count)
	want := 0
	for i := 0; i < a.count; i++ {
		r, err := p.SendMessageInTransaction(context.Background(), message(a, i))
		if err != nil {
			sent = append(sent, result{"i": i, "error": err.Error()})
			continue
		}
		entry := sendResultJSON(i, r.SendResult, nil)
		entry["local_state"] = int(r.State)
		sent = append(sent, entry)
		if i%3 != 1 {
			want++
		}
	}
	col := newCollector(want)
	out, err := consumeResult(col, a, []string{"c1"}, false, collectAll(col))
	_ = p.Shutdown()
	if err != nil {
		return nil, err
	}
	tl.mu.Lock()
	out["checks"] = append([]string(nil), tl.checks...)
	tl.mu.Unlock()
	out["sent"] = sent
	return out, nil
}

func scenarioDelay(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	sent := sendAll(a, p, func(_ int, m *primitive.Message) { m.WithDelayTimeLevel(1) })
	_ = p.Shutdown()
	col := newCollector(a.count)
	out, err := consumeResult(col, a, []string{"c1"}, false, collectAll(col))
	if err != nil {
		return nil, err
	}
	out["sent"] = sent
	return out, nil
}

func scenarioRetry(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	sent := sendAll(a, p, nil)
	_ = p.Shutdown()
	if err := createRetryTopic(a); err != nil {
		return nil, err
	}
	col := newCollector(a.count)
	fn := func(ctx context.Context, name string, msgs ...*primitive.MessageExt) consumer.ConsumeResult {
		retry := false
		for _, m := range msgs {
			first := m.ReconsumeTimes == 0
			col.add(messageJSON(m, name), m.GetProperty("seq"), !first)
			retry = retry || first
		}
		if retry {
			if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
				cc.DelayLevelWhenNextConsume = 1
			}
			return consumer.ConsumeRetryLater
		}
		return consumer.ConsumeSuccess
	}
	out, err := consumeResult(col, a, []string{"c1"}, false, fn)
	if err != nil {
		return nil, err
	}
	out["sent"] = sent
	return out, nil
}

// --- more send modes ---------------------------------------------------------------------------------------

func scenarioAsync(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	sent := make([]result, a.count)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < a.count; i++ {
		i := i
		wg.Add(1)
		var once sync.Once // the client's callback can run twice on a transport error
		err := p.SendAsync(context.Background(), func(_ context.Context, r *primitive.SendResult, err error) {
			once.Do(func() {
				mu.Lock()
				sent[i] = sendResultJSON(i, r, err)
				mu.Unlock()
				wg.Done()
			})
		}, message(a, i))
		if err != nil {
			sent[i] = sendResultJSON(i, nil, err)
			wg.Done()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(a.timeout):
		return nil, fmt.Errorf("async send callbacks not all called within %s", a.timeout)
	}
	mu.Lock()
	defer mu.Unlock()
	return result{"sent": sent}, nil
}

func scenarioOneway(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	oneway := make([]result, 0, a.count)
	for i := 0; i < a.count; i++ {
		entry := result{"i": i}
		if err := p.SendOneWay(context.Background(), message(a, i)); err != nil {
			entry["error"] = err.Error()
		}
		oneway = append(oneway, entry)
	}
	return result{"oneway": oneway}, nil
}

func scenarioBatch(a args) (result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	msgs := make([]*primitive.Message, 0, a.count)
	for i := 0; i < a.count; i++ {
		msgs = append(msgs, message(a, i))
	}
	r, err := p.SendSync(context.Background(), msgs...)
	entry := sendResultJSON(0, r, err)
	if err == nil {
		entry["msg_ids"] = strings.Split(r.MsgID, ",")
	}
	return result{"batch": entry}, nil
}

// --- more consumers ----------------------------------------------------------------------------------------

func produce(a args) ([]result, error) {
	p, err := newProducer(a)
	if err != nil {
		return nil, err
	}
	sent := sendAll(a, p, nil)
	_ = p.Shutdown()
	return sent, nil
}

func scenarioBroadcasting(a args) (result, error) {
	sent, err := produce(a)
	if err != nil {
		return nil, err
	}
	col := newCollector(2 * a.count) // keyed by consumer and seq
	fn := func(_ context.Context, name string, msgs ...*primitive.MessageExt) consumer.ConsumeResult {
		for _, m := range msgs {
			col.add(messageJSON(m, name), name+"/"+m.GetProperty("seq"), true)
		}
		return consumer.ConsumeSuccess
	}
	out, err := consumeWith(col, a, []string{"c1", "c2"}, func(name string) (rocketmq.PushConsumer, error) {
		return startConsumerWith(a.namesrv, a.group, a.topic, name, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
			fn, consumer.WithConsumerModel(consumer.BroadCasting))
	})
	if err != nil {
		return nil, err
	}
	out["sent"] = sent
	return out, nil
}

// consumeSelected consumes with one clustering consumer and selector; want seqs count toward completion.
func consumeSelected(a args, sel consumer.MessageSelector, want func(i int) bool) (result, error) {
	sent, err := produce(a)
	if err != nil {
		return nil, err
	}
	n := 0
	for i := 0; i < a.count; i++ {
		if want(i) {
			n++
		}
	}
	col := newCollector(n)
	fn := func(_ context.Context, name string, msgs ...*primitive.MessageExt) consumer.ConsumeResult {
		for _, m := range msgs {
			seq := m.GetProperty("seq")
			i, _ := strconv.Atoi(seq)
			col.add(messageJSON(m, name), seq, want(i))
		}
		return consumer.ConsumeSuccess
	}
	out, err := consumeWith(col, a, []string{"c1"}, func(name string) (rocketmq.PushConsumer, error) {
		return startConsumerWith(a.namesrv, a.group, a.topic, name, sel, fn)
	})
	if err != nil {
		return nil, err
	}
	out["sent"] = sent
	return out, nil
}

func scenarioTag(a args) (result, error) {
	return consumeSelected(a, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"},
		func(i int) bool { return i%2 == 0 })
}

func scenarioSQL92(a args) (result, error) {
	return consumeSelected(a, consumer.MessageSelector{Type: consumer.SQL92, Expression: "seq >= 2 AND seq < 5"},
		func(i int) bool { return i >= 2 && i < 5 })
}

const dlqMaxReconsumeTimes = 2

// createRetryTopic has the broker create %RETRY%<group> before the group's real consumer starts. The
// broker creates it at the group's first heartbeat (as Apache's does), but this client reads its routes
// at start, before that heartbeat, and then only every 30 s: a consumer started first would not pull its
// retry topic for up to 30 s. A consumer of the group on TBW102 (no messages) sends that heartbeat.
func createRetryTopic(a args) error {
	c, err := startConsumerWith(a.namesrv, a.group, "TBW102", "warmup",
		consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(context.Context, string, ...*primitive.MessageExt) consumer.ConsumeResult {
			return consumer.ConsumeSuccess
		})
	if err != nil {
		return err
	}
	return c.Shutdown()
}

func scenarioDLQ(a args) (result, error) {
	sent, err := produce(a)
	if err != nil {
		return nil, err
	}
	if err := createRetryTopic(a); err != nil {
		return nil, err
	}
	col := newCollector(a.count) // complete once each message had its last delivery
	fn := func(_ context.Context, name string, msgs ...*primitive.MessageExt) consumer.ConsumeResult {
		for _, m := range msgs {
			col.add(messageJSON(m, name), m.GetProperty("seq"), m.ReconsumeTimes >= dlqMaxReconsumeTimes)
		}
		return consumer.ConsumeRetryLater
	}
	c, err := startConsumerWith(a.namesrv, a.group, a.topic, "c1", consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		fn, consumer.WithMaxReconsumeTimes(dlqMaxReconsumeTimes))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(a.timeout)
	complete := col.wait(a.timeout)
	// the dead letters: %DLQ%<group> exists once the first one is stored, read it with a second group
	dead := newCollector(a.count)
	dlqTopic := "%DLQ%" + a.group
	var reader rocketmq.PushConsumer
	for attempt := 0; complete && time.Now().Before(deadline); attempt++ {
		reader, err = startConsumerWith(a.namesrv, a.group+"_dlq", dlqTopic, fmt.Sprintf("d%d", attempt),
			consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, collectAll(dead))
		if err == nil {
			break
		}
		reader = nil
		time.Sleep(200 * time.Millisecond) // the topic's route appears with its first message
	}
	deadComplete := false
	if reader != nil {
		deadComplete = dead.wait(time.Until(deadline))
		_ = reader.Shutdown()
	}
	_ = c.Shutdown()
	return result{"received": col.snapshot(), "complete": complete && deadComplete, "dead": dead.snapshot(), "sent": sent}, nil
}

// --- pull consumer -----------------------------------------------------------------------------------------

// scenarioPull reads with Poll and stores offsets with ACK: the client's own rebalance (started by Start)
// drops the offsets of the queues it assigns (consumer.go updateProcessQueueTable: storage.remove), so
// offsets set with UpdateOffset after PullFrom can be lost when that rebalance comes late.
func scenarioPull(a args) (result, error) {
	sent, err := produce(a)
	if err != nil {
		return nil, err
	}
	pc, err := rocketmq.NewPullConsumer(
		consumer.WithNameServer([]string{a.namesrv}),
		consumer.WithGroupName(a.group),
		consumer.WithInstance("pull"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return nil, err
	}
	if err := pc.Subscribe(a.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}); err != nil {
		return nil, err
	}
	if err := pc.Start(); err != nil {
		return nil, err
	}
	col := newCollector(a.count)
	deadline := time.Now().Add(a.timeout)
	for !col.complete() && time.Now().Before(deadline) {
		cr, err := pc.Poll(context.Background(), time.Second)
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			_ = pc.Shutdown()
			return nil, err
		}
		for _, m := range cr.GetMsgList() {
			col.add(messageJSON(m, "pull"), m.GetProperty("seq"), true)
		}
		pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	mqAdmin, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{a.namesrv})))
	if err != nil {
		return nil, err
	}
	defer mqAdmin.Close()
	queues, err := mqAdmin.FetchPublishMessageQueues(context.Background(), a.topic)
	if err != nil {
		return nil, err
	}
	offsets := map[string]int64{}
	for _, q := range queues {
		offset, _ := pc.CurrentOffset(q)
		offsets[strconv.Itoa(q.QueueId)] = offset
	}
	if err := pc.PersistOffset(context.Background(), a.topic); err != nil {
		return nil, err
	}
	_ = pc.Shutdown()
	return result{"received": col.snapshot(), "complete": col.complete(), "offsets": offsets, "sent": sent}, nil
}
