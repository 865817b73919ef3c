// franz-roundtrip: franz-go (github.com/twmb/franz-go), an unmodified Go Kafka client, against a
// broker: creates a topic with kadm, produces keyed records (idempotent, franz-go's default),
// consumes them in a consumer group, commits, and reads the group's lag back with kadm.
// Prints one JSON object for the Rust test (tests/e2e/franz_go.rs) to check. With -txn-session,
// GroupTransactSession members that join and leave (txn.go, for tests/client/franz_txn.rs).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type summary struct {
	Produced    int              `json:"produced"`
	Consumed    int              `json:"consumed"`
	Duplicates  int              `json:"duplicates"`
	PartitionOf map[string]int32 `json:"partition_of"`
	Committed   int64            `json:"committed"`
	Lag         int64            `json:"lag"`
	GroupState  string           `json:"group_state"`
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap address")
	topic := flag.String("topic", "franz", "topic to create and use")
	group := flag.String("group", "franz-group", "consumer group")
	partitions := flag.Int("partitions", 3, "partitions of the topic")
	n := flag.Int("n", 1000, "records")
	keys := flag.Int("keys", 20, "distinct keys")
	txnSession := flag.Bool("txn-session", false, "run GroupTransactSession members over -topic into -topic.out (txn.go)")
	timeout := flag.Duration("timeout", 90*time.Second, "how long -txn-session may take")
	serverSide := flag.Bool("server-side", false, "-txn-session in a KIP-848 consumer group")
	flag.Parse()
	var err error
	if *txnSession {
		err = runTxnSession(*brokers, *topic, *topic+".out", *group, int32(*partitions), *n, *serverSide, *timeout)
	} else {
		err = run(*brokers, *topic, *group, int32(*partitions), *n, *keys)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "franz-roundtrip:", err)
		os.Exit(1)
	}
}

// seeds: the addresses of a comma-separated bootstrap list.
func seeds(brokers string) []string {
	return strings.Split(brokers, ",")
}

func run(brokers, topic, group string, partitions int32, n, keys int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := summary{PartitionOf: map[string]int32{}}

	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds(brokers)...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	created, err := kadm.NewClient(producer).CreateTopics(ctx, partitions, 1, nil, topic)
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := created.Error(); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	records := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		records = append(records, &kgo.Record{
			Key:   []byte(fmt.Sprintf("key-%d", i%keys)),
			Value: []byte(fmt.Sprintf("value-%d", i)),
		})
	}
	results := producer.ProduceSync(ctx, records...)
	if err := results.FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	for _, r := range results {
		key := string(r.Record.Key)
		if p, seen := out.PartitionOf[key]; seen && p != r.Record.Partition {
			return fmt.Errorf("key %s went to partitions %d and %d", key, p, r.Record.Partition)
		}
		out.PartitionOf[key] = r.Record.Partition
	}
	out.Produced = len(results)
	producer.Close()

	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(seeds(brokers)...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for len(seen) < n {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumed %d of %d: %w", len(seen), n, err)
		}
		for _, e := range fetches.Errors() {
			return fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			value := string(r.Value)
			if seen[value] {
				out.Duplicates++
			}
			seen[value] = true
			out.Consumed++
		})
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	consumer.Close()

	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds(brokers)...))
	if err != nil {
		return err
	}
	defer admin.Close()
	lags, err := kadm.NewClient(admin).Lag(ctx, group)
	if err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	described, ok := lags[group]
	if !ok {
		return fmt.Errorf("no lag for group %s", group)
	}
	if err := described.Error(); err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	out.GroupState = described.State
	for _, l := range described.Lag.Sorted() {
		if l.Err != nil {
			return fmt.Errorf("lag of %s[%d]: %w", l.Topic, l.Partition, l.Err)
		}
		out.Committed += l.Commit.At
		out.Lag += l.Lag
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
