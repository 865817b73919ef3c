package main

// The -txn-session mode: franz-go's GroupTransactSession (consume-transform-produce, exactly
// once) in a group whose members join and leave while it runs. Input records "in-<i>" are
// produced first; each member reads them read_committed, writes "out-<i>" in a transaction
// with the group's offsets and ends it with End(TryCommit). Members come and go on a schedule
// (two at first, a third joins, the first leaves, a fourth joins), each change a rebalance.
// With -server-side the group is a KIP-848 consumer group (the broker assigns). The summary:
// what a read_committed reader of the output finds, the commits and aborts the
// sessions ended with, and the offsets the group committed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type txnSummary struct {
	Input      int   `json:"input"`
	Output     int   `json:"output"`
	Distinct   int   `json:"distinct"`
	Commits    int64 `json:"commits"`
	Aborts     int64 `json:"aborts"`
	Committed  int64 `json:"committed"`
	ElapsedMs  int64 `json:"elapsed_ms"`
	Transacted bool  `json:"transacted"`
}

// member runs one GroupTransactSession until stop is closed or ctx ends.
func member(ctx context.Context, brokers, group, input, output, id string, serverSide bool,
	stop <-chan struct{}, commits, aborts *atomic.Int64) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds(brokers)...),
		kgo.TransactionalID(id),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(output),
		kgo.SessionTimeout(10 * time.Second),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.TransactionTimeout(30 * time.Second),
		kgo.WithLogger(logger(id)),
	}
	if serverSide {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer sess.Close()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		poll, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := sess.PollRecords(poll, 20)
		cancel()
		if fetches.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("%s begin: %w", id, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value[3:]...)}, nil)
		})
		// Some work per transaction, so the joins and leaves fall inside transactions.
		time.Sleep(50 * time.Millisecond)
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s end: %w", id, err)
		}
		if committed {
			commits.Add(1)
		} else {
			aborts.Add(1)
		}
	}
}

// logger: franz-go's log lines of member id on stderr, at FRANZ_LOG=info or debug (else none).
func logger(id string) kgo.Logger {
	level := kgo.LogLevelNone
	switch os.Getenv("FRANZ_LOG") {
	case "info":
		level = kgo.LogLevelInfo
	case "debug":
		level = kgo.LogLevelDebug
	}
	return kgo.BasicLogger(os.Stderr, level, func() string { return id + " " })
}

func runTxnSession(brokers, input, output, group string, partitions int32, n int, serverSide bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	started := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(brokers)...), kgo.DefaultProduceTopic(input))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{input, output} {
		created, err := adm.CreateTopics(ctx, partitions, -1, nil, topic)
		if err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
		if err := created.Error(); err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
	}
	records := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("in-%d", i))})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("produce input: %w", err)
	}

	var commits, aborts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stops := []chan struct{}{}
	spawn := func(i int) {
		stop := make(chan struct{})
		stops = append(stops, stop)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := member(ctx, brokers, group, input, output, fmt.Sprintf("%s-member-%d", group, i), serverSide, stop, &commits, &aborts); err != nil {
				errs <- err
			}
		}()
	}
	spawn(0)
	spawn(1)
	out := txnSummary{Input: n}
	seen := map[string]int{}
	schedule := []func(){
		func() { spawn(2) },
		func() { close(stops[0]) },
		func() { spawn(3) },
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(seeds(brokers)...), kgo.ConsumeTopics(output),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer reader.Close()
	next := time.Now().Add(2 * time.Second)
	for len(seen) < n && ctx.Err() == nil {
		if len(schedule) > 0 && time.Now().After(next) {
			schedule[0]()
			schedule = schedule[1:]
			next = time.Now().Add(2 * time.Second)
		}
		poll, cancelPoll := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := reader.PollFetches(poll)
		cancelPoll()
		fetches.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			out.Output++
		})
		select {
		case err := <-errs:
			return err
		default:
		}
	}
	// Let the schedule finish, so every join and leave happened, then stop the members.
	for _, step := range schedule {
		step()
	}
	for i, stop := range stops {
		if i > 0 {
			close(stop)
		}
	}
	wg.Wait()
	// Anything committed while the members stopped.
	for {
		poll, cancelPoll := context.WithTimeout(context.Background(), 2*time.Second)
		fetches := reader.PollFetches(poll)
		cancelPoll()
		if fetches.Empty() {
			break
		}
		fetches.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			out.Output++
		})
	}
	out.Distinct = len(seen)
	out.Commits = commits.Load()
	out.Aborts = aborts.Load()
	out.Transacted = len(seen) == n
	offsets, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return fmt.Errorf("fetch offsets: %w", err)
	}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Topic == input && o.Err == nil {
			out.Committed += o.At
		}
	})
	out.ElapsedMs = time.Since(started).Milliseconds()
	return json.NewEncoder(os.Stdout).Encode(out)
}
