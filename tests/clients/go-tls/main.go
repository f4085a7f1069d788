// Drives github.com/apache/rocketmq-client-go/v2 with TLS and ACL credentials against a broker, for rmq's
// aclRequireTls test. Its own module: TLS (WithTls, commit c9e197c "support tls connection") came to the Go
// client after its last release, 2.1.2, so this driver pins a later commit of its master branch (go.mod),
// while tests/clients/go stays on 2.1.2.
//
// Usage: rmq-go-tls-driver SCENARIO -namesrv ADDR -topic T -group G [-count N] [-timeout S] [-tls]
// [-ak KEY -sk SECRET]
//
//	send     sync send N messages (bodies "<topic>#<i>"); each result's status or error
//	consume  a push consumer of G (from the first offset) receives N messages or -timeout passes
//
// Prints exactly one JSON object on the last line of stdout; the client's own logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
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
	tls     bool
	ak, sk  string
}

type result map[string]interface{}

func main() {
	if len(os.Args) < 2 {
		fail("usage: rmq-go-tls-driver SCENARIO -namesrv A -topic T -group G [-count N] [-timeout S] [-tls] [-ak K -sk S]")
	}
	scenario := os.Args[1]
	fs := flag.NewFlagSet(scenario, flag.ExitOnError)
	a := args{}
	fs.StringVar(&a.namesrv, "namesrv", "", "name server address")
	fs.StringVar(&a.topic, "topic", "", "topic")
	fs.StringVar(&a.group, "group", "", "producer/consumer group")
	fs.IntVar(&a.count, "count", 4, "messages")
	fs.BoolVar(&a.tls, "tls", false, "connect with TLS")
	fs.StringVar(&a.ak, "ak", "", "ACL access key")
	fs.StringVar(&a.sk, "sk", "", "ACL secret key")
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
	case "consume":
		out, err = scenarioConsume(a)
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

func credentials(a args) primitive.Credentials {
	return primitive.Credentials{AccessKey: a.ak, SecretKey: a.sk}
}

func scenarioSend(a args) (result, error) {
	opts := []producer.Option{
		producer.WithNameServer([]string{a.namesrv}),
		producer.WithGroupName(a.group),
		producer.WithRetry(1),
		producer.WithSendMsgTimeout(10 * time.Second),
		producer.WithTls(a.tls),
	}
	if a.ak != "" {
		opts = append(opts, producer.WithCredentials(credentials(a)))
	}
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = p.Shutdown() }()
	statuses := []string{}
	errors := []string{}
	for i := 0; i < a.count; i++ {
		msg := primitive.NewMessage(a.topic, []byte(fmt.Sprintf("%s#%d", a.topic, i)))
		r, err := p.SendSync(context.Background(), msg)
		if err != nil {
			errors = append(errors, err.Error())
		} else if r.Status == primitive.SendOK {
			statuses = append(statuses, "SEND_OK")
		} else {
			statuses = append(statuses, fmt.Sprintf("status %d", r.Status))
		}
	}
	return result{"statuses": statuses, "errors": errors}, nil
}

func scenarioConsume(a args) (result, error) {
	opts := []consumer.Option{
		consumer.WithNameServer([]string{a.namesrv}),
		consumer.WithGroupName(a.group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithTls(a.tls),
	}
	if a.ak != "" {
		opts = append(opts, consumer.WithCredentials(credentials(a)))
	}
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	bodies := []string{}
	done := make(chan struct{})
	err = c.Subscribe(a.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				bodies = append(bodies, string(m.Body))
			}
			if len(bodies) >= a.count {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	complete := true
	select {
	case <-done:
	case <-time.After(a.timeout):
		complete = false
	}
	_ = c.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(bodies)
	return result{"bodies": bodies, "complete": complete}, nil
}
