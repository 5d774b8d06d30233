// Command overload is the single-broker "local" scenario of the MQTT-ST paper, written with
// a common Go client library (github.com/eclipse/paho.mqtt.golang) the way an ordinary user
// would: -publishers clients publish -messages messages of -size bytes each at -qos on
// <topic-prefix>/<i>, one at a time (token.Wait() after each Publish, so at QoS 2 the next
// publish waits for the PUBCOMP of the previous one), while -subscribers clients subscribed
// to <topic-prefix>/# at -qos receive every message. It measures how fast the broker
// acknowledges the publishers and how long each message takes to reach each subscriber.
//
// Client options: the library's defaults (NewClientOptions) apart from the broker address,
// a client id of its own per client, clean session (already the default) and AutoReconnect
// off: a connection that drops fails its tokens and is counted in "connections_lost",
// instead of being re-established behind the measurement's back (with a clean session the
// messages in flight would be lost silently).
//
// Every subscriber has its SUBACK (with the QoS asked for) before any publisher starts.
// Payload (-size bytes, at least 16): publisher id (uint32), sequence number (uint32), send
// time (int64, ns on this process's monotonic clock, read just before Publish), big-endian,
// then padding. A subscriber's message handler reads the clock first; latency = receipt - send
// time, over every delivery to every subscriber. It also counts duplicates (a (publisher,
// sequence) it already had) and deliveries out of order (a sequence number below the highest
// already received from that publisher). The run ends when every subscriber has every
// message, or once every publisher is done and no subscriber has received anything for
// -quiet (a broker that dropped messages at its queue limit), or at -deadline after the first
// publish; the JSON (-json) is written either way.
//
// Exit status: 0 when every subscriber got every message once and in order, 1 when not
// (deadline, loss, duplicates, disorder, a publish that failed), 2 when the run could not be
// set up (connect or subscribe failed, bad flags).
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// base is the origin of the payload's send time: every client is in this process, so
// latencies are differences of one monotonic clock.
var base = time.Now()

func now() int64 { return int64(time.Since(base)) }

type config struct {
	broker      string
	publishers  int
	messages    int
	size        int
	subscribers int
	qos         int
	prefix      string
	jsonPath    string
	deadline    time.Duration
	quiet       time.Duration
}

// subscriber is one receiving client's record of what it got.
type subscriber struct {
	mu         sync.Mutex
	expected   int
	unique     int
	latencies  []int64  // ns, one per delivery (duplicates included)
	seen       [][]bool // [publisher][sequence]
	highest    []int    // per publisher: highest sequence received, -1 before any
	duplicates int
	disorder   int
	foreign    int // payloads that are not ours (wrong size, ids out of range)
	last       int64
	done       chan struct{}
}

func (s *subscriber) handle(_ mqtt.Client, m mqtt.Message) {
	at := now()
	p := m.Payload()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) < 16 {
		s.foreign++
		return
	}
	pub := int(binary.BigEndian.Uint32(p[0:4]))
	seq := int(binary.BigEndian.Uint32(p[4:8]))
	sent := int64(binary.BigEndian.Uint64(p[8:16]))
	if pub >= len(s.seen) || seq >= len(s.seen[pub]) {
		s.foreign++
		return
	}
	s.latencies = append(s.latencies, at-sent)
	s.last = at
	if s.seen[pub][seq] {
		s.duplicates++
		return
	}
	s.seen[pub][seq] = true
	if seq < s.highest[pub] {
		s.disorder++
	} else {
		s.highest[pub] = seq
	}
	s.unique++
	if s.unique == s.expected {
		close(s.done)
	}
}

// publisher is one publishing client's timings.
type publisher struct {
	first, last int64 // first Publish, last completed token (ns since base)
	completed   int
	err         string
}

type latencyStats struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Min   float64 `json:"min"`
}

type publisherResult struct {
	ID         int     `json:"id"`
	Completed  int     `json:"completed"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	Error      string  `json:"error,omitempty"`
}

type result struct {
	Broker      string `json:"broker"`
	Publishers  int    `json:"publishers"`
	Messages    int    `json:"messages"`
	Size        int    `json:"size"`
	Subscribers int    `json:"subscribers"`
	QoS         int    `json:"qos"`
	TopicPrefix string `json:"topic_prefix"`
	Library     string `json:"library"`
	GoMaxProcs  int    `json:"gomaxprocs"`

	PerPublisher             []publisherResult `json:"per_publisher"`
	MeanPublisherThroughput  float64           `json:"mean_publisher_throughput"`
	PublishSeconds           float64           `json:"publish_seconds"`
	DeliverySeconds          float64           `json:"delivery_seconds"`
	DrainAfterPublishSeconds float64           `json:"drain_after_publish_seconds"`
	LatencyMs                latencyStats      `json:"latency_ms"`
	Delivered                int               `json:"delivered"`
	Expected                 int               `json:"expected"`
	Duplicates               int               `json:"duplicates"`
	OutOfOrder               int               `json:"out_of_order"`
	Foreign                  int               `json:"foreign"`
	PerSubscriberDelivered   []int             `json:"per_subscriber_delivered"`
	ConnectionsLost          int64             `json:"connections_lost"`
	Complete                 bool              `json:"complete"`
	Ended                    string            `json:"ended"` // complete, quiet or deadline
	TimedOut                 bool              `json:"timed_out"`
}

func main() {
	var c config
	flag.StringVar(&c.broker, "broker", "tcp://127.0.0.1:1883", "broker URI")
	flag.IntVar(&c.publishers, "publishers", 10, "publishing clients")
	flag.IntVar(&c.messages, "messages", 1000, "messages per publisher")
	flag.IntVar(&c.size, "size", 100, "payload bytes (at least 16)")
	flag.IntVar(&c.subscribers, "subscribers", 10, "subscribing clients")
	flag.IntVar(&c.qos, "qos", 2, "QoS of the publishes and the subscriptions")
	flag.StringVar(&c.prefix, "topic-prefix", "bench", "publisher i publishes on PREFIX/i; subscribers take PREFIX/#")
	flag.StringVar(&c.jsonPath, "json", "", "write the results here")
	flag.DurationVar(&c.deadline, "deadline", 120*time.Second, "end the run this long after the first publish")
	flag.DurationVar(&c.quiet, "quiet", 10*time.Second, "end the run when the publishers are done and nothing arrived for this long")
	flag.Parse()
	if c.size < 16 || c.publishers < 1 || c.messages < 1 || c.subscribers < 1 || c.qos < 0 || c.qos > 2 {
		fmt.Fprintln(os.Stderr, "overload: need -size >= 16, -publishers/-messages/-subscribers >= 1, -qos 0..2")
		os.Exit(2)
	}
	r, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(2)
	}
	if c.jsonPath != "" {
		out, _ := json.MarshalIndent(r, "", " ")
		if err := os.WriteFile(c.jsonPath, append(out, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "overload:", err)
			os.Exit(2)
		}
	}
	fmt.Printf("publishers %d x %d msg, subscribers %d, QoS %d: %.0f msg/s per publisher, "+
		"publishing %.2f s; e2e mean %.2f p50 %.2f p90 %.2f p99 %.2f max %.2f ms; "+
		"delivered %d/%d, duplicates %d, out of order %d; ended: %s\n",
		c.publishers, c.messages, c.subscribers, c.qos, r.MeanPublisherThroughput,
		r.PublishSeconds, r.LatencyMs.Mean, r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99,
		r.LatencyMs.Max, r.Delivered, r.Expected, r.Duplicates, r.OutOfOrder, r.Ended)
	if !r.Complete {
		os.Exit(1)
	}
}

func options(c config, id string, lost *int64) *mqtt.ClientOptions {
	o := mqtt.NewClientOptions()
	o.AddBroker(c.broker)
	o.SetClientID(id)
	o.SetCleanSession(true)
	o.SetAutoReconnect(false)
	o.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		atomic.AddInt64(lost, 1)
		fmt.Fprintf(os.Stderr, "overload: %s lost its connection: %v\n", id, err)
	})
	return o
}

func run(c config) (*result, error) {
	var lost int64
	tag := os.Getpid()
	subs := make([]*subscriber, c.subscribers)
	subClients := make([]mqtt.Client, c.subscribers)
	pubClients := make([]mqtt.Client, c.publishers)
	defer func() { disconnect(append(subClients, pubClients...)) }()

	filter := c.prefix + "/#"
	for i := range subs {
		s := &subscriber{expected: c.publishers * c.messages, done: make(chan struct{}),
			latencies: make([]int64, 0, c.publishers*c.messages),
			seen:      make([][]bool, c.publishers), highest: make([]int, c.publishers)}
		for p := range s.seen {
			s.seen[p] = make([]bool, c.messages)
			s.highest[p] = -1
		}
		subs[i] = s
		cl := mqtt.NewClient(options(c, fmt.Sprintf("overload-%d-sub-%d", tag, i), &lost))
		if t := cl.Connect(); t.Wait() && t.Error() != nil {
			return nil, fmt.Errorf("subscriber %d: connect: %w", i, t.Error())
		}
		subClients[i] = cl
		t := cl.Subscribe(filter, byte(c.qos), s.handle)
		if t.Wait() && t.Error() != nil {
			return nil, fmt.Errorf("subscriber %d: subscribe: %w", i, t.Error())
		}
		if granted := t.(*mqtt.SubscribeToken).Result()[filter]; int(granted) != c.qos {
			return nil, fmt.Errorf("subscriber %d: SUBACK granted 0x%02x for QoS %d", i, granted, c.qos)
		}
	}
	for i := range pubClients {
		cl := mqtt.NewClient(options(c, fmt.Sprintf("overload-%d-pub-%d", tag, i), &lost))
		if t := cl.Connect(); t.Wait() && t.Error() != nil {
			return nil, fmt.Errorf("publisher %d: connect: %w", i, t.Error())
		}
		pubClients[i] = cl
	}

	pubs := make([]*publisher, c.publishers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range pubs {
		pubs[i] = &publisher{}
		wg.Add(1)
		go func(i int, p *publisher, cl mqtt.Client) {
			defer wg.Done()
			topic := fmt.Sprintf("%s/%d", c.prefix, i)
			payload := make([]byte, c.size)
			for k := range payload[16:] {
				payload[16+k] = 'x'
			}
			binary.BigEndian.PutUint32(payload[0:4], uint32(i))
			<-start
			for seq := 0; seq < c.messages; seq++ {
				binary.BigEndian.PutUint32(payload[4:8], uint32(seq))
				sent := now()
				binary.BigEndian.PutUint64(payload[8:16], uint64(sent))
				if seq == 0 {
					p.first = sent
				}
				// the library keeps the slice until the message is sent: give it a copy
				t := cl.Publish(topic, byte(c.qos), false, append([]byte(nil), payload...))
				t.Wait()
				if t.Error() != nil {
					p.err = t.Error().Error()
					return
				}
				p.last = now()
				p.completed++
			}
		}(i, pubs[i], pubClients[i])
	}

	started := now()
	close(start)
	published := make(chan struct{})
	go func() { wg.Wait(); close(published) }()
	allDone := make(chan struct{})
	go func() {
		for _, s := range subs {
			<-s.done
		}
		close(allDone)
	}()
	timer := time.NewTimer(c.deadline)
	defer timer.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ended := ""
	for waiting := 2; waiting > 0 && ended == ""; {
		select {
		case <-published:
			published = nil
			waiting--
		case <-allDone:
			allDone = nil
			waiting--
		case <-tick.C:
			if published == nil && now()-lastDelivery(subs) > int64(c.quiet) {
				ended = "quiet"
			}
		case <-timer.C:
			ended = "deadline"
		}
	}
	if ended == "" {
		ended = "complete"
	}
	return summarise(c, subs, pubs, started, ended, atomic.LoadInt64(&lost)), nil
}

// lastDelivery is the time of the latest delivery to any subscriber (0 before the first).
func lastDelivery(subs []*subscriber) int64 {
	var last int64
	for _, s := range subs {
		s.mu.Lock()
		if s.last > last {
			last = s.last
		}
		s.mu.Unlock()
	}
	return last
}

func disconnect(clients []mqtt.Client) {
	var wg sync.WaitGroup
	for _, cl := range clients {
		if cl == nil {
			continue
		}
		wg.Add(1)
		go func(cl mqtt.Client) { defer wg.Done(); cl.Disconnect(100) }(cl)
	}
	wg.Wait()
}

func summarise(c config, subs []*subscriber, pubs []*publisher, started int64, ended string,
	lost int64) *result {
	timedOut := ended == "deadline"
	r := &result{Broker: c.broker, Publishers: c.publishers, Messages: c.messages, Size: c.size,
		Subscribers: c.subscribers, QoS: c.qos, TopicPrefix: c.prefix,
		Library: "github.com/eclipse/paho.mqtt.golang v1.5.1", GoMaxProcs: goMaxProcs(),
		Expected: c.publishers * c.messages * c.subscribers, TimedOut: timedOut, Ended: ended,
		ConnectionsLost: lost}
	var lastAck, latest int64
	var sum float64
	publishOK := true
	for i, p := range pubs {
		pr := publisherResult{ID: i, Completed: p.completed, Error: p.err}
		if p.completed > 0 && p.last > p.first {
			pr.Seconds = float64(p.last-p.first) / 1e9
			pr.Throughput = float64(p.completed) / pr.Seconds
		}
		if p.completed != c.messages {
			publishOK = false
		}
		sum += pr.Throughput
		if p.last > lastAck {
			lastAck = p.last
		}
		r.PerPublisher = append(r.PerPublisher, pr)
	}
	r.MeanPublisherThroughput = sum / float64(len(pubs))
	r.PublishSeconds = float64(lastAck-started) / 1e9
	var all []int64
	for _, s := range subs {
		s.mu.Lock()
		all = append(all, s.latencies...)
		r.Delivered += s.unique
		r.PerSubscriberDelivered = append(r.PerSubscriberDelivered, s.unique)
		r.Duplicates += s.duplicates
		r.OutOfOrder += s.disorder
		r.Foreign += s.foreign
		if s.last > latest {
			latest = s.last
		}
		s.mu.Unlock()
	}
	if latest > 0 {
		r.DeliverySeconds = float64(latest-started) / 1e9
		r.DrainAfterPublishSeconds = float64(latest-lastAck) / 1e9
	}
	r.LatencyMs = stats(all)
	r.Complete = ended == "complete" && publishOK && r.Delivered == r.Expected && r.Duplicates == 0 &&
		r.OutOfOrder == 0 && r.Foreign == 0
	return r
}

func stats(ns []int64) latencyStats {
	if len(ns) == 0 {
		return latencyStats{}
	}
	sort.Slice(ns, func(a, b int) bool { return ns[a] < ns[b] })
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ns)))) - 1
		if i < 0 {
			i = 0
		}
		return float64(ns[i]) / 1e6
	}
	return latencyStats{Count: len(ns), Mean: sum / float64(len(ns)) / 1e6, P50: at(0.50),
		P90: at(0.90), P99: at(0.99), Max: float64(ns[len(ns)-1]) / 1e6,
		Min: float64(ns[0]) / 1e6}
}

func goMaxProcs() int { return runtime.GOMAXPROCS(0) }
