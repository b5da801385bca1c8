package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one consumer of a group; its assignment is kept up to date by kgo's callbacks.
type member struct {
	name string
	cl   *kgo.Client
	mu   sync.Mutex
	own  map[int32]bool
}

func newMember(name, topic, group string) (*member, error) {
	m := &member{name: name, own: map[int32]bool{}}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				if add {
					m.own[p] = true
				} else {
					delete(m.own, p)
				}
			}
			event := "revoked"
			if add {
				event = "assigned"
			}
			emit(obj{"event": event, "member": name, "partitions": sortedInt32(ps[topic])})
		}
	}
	cl, err := kgo.NewClient(append(baseOpts("gocheck-"+name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.OnPartitionsAssigned(update(true)), kgo.OnPartitionsRevoked(update(false)),
		kgo.OnPartitionsLost(update(false)))...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []int32{}
	for p := range m.own {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// awaitAssignment polls every member until each owns exactly the partitions want says (kgo runs
// the group protocol in the background; polling is what hands out the records meanwhile).
func awaitAssignment(ctx context.Context, want func(members []*member) bool, members ...*member) error {
	deadline := time.Now().Add(opTimeout)
	for !want(members) {
		if time.Now().After(deadline) {
			got := obj{}
			for _, m := range members {
				got[m.name] = m.partitions()
			}
			return fmt.Errorf("assignment not reached in %s: %v", opTimeout, got)
		}
		for _, m := range members {
			count := 0
			if err := pollOnce(ctx, m.cl, m.name, 100*time.Millisecond, &count); err != nil {
				return err
			}
			if count != 0 {
				return fmt.Errorf("%s got %d records while waiting for a rebalance", m.name, count)
			}
		}
	}
	return nil
}

// splitAmong: every partition owned by exactly one member, and no member without partitions.
func splitAmong(numPartitions int) func([]*member) bool {
	return func(members []*member) bool {
		seen := map[int32]int{}
		for _, m := range members {
			ps := m.partitions()
			if len(ps) == 0 {
				return false
			}
			for _, p := range ps {
				seen[p]++
			}
		}
		if len(seen) != numPartitions {
			return false
		}
		for _, c := range seen {
			if c != 1 {
				return false
			}
		}
		return true
	}
}

func emitAssignment(phase string, members ...*member) {
	got := obj{}
	for _, m := range members {
		got[m.name] = m.partitions()
	}
	emit(obj{"event": "assignment", "phase": phase, "members": got})
}

func commit(ctx context.Context, m *member) error {
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return m.cl.CommitUncommittedOffsets(cctx)
}

// groupScenario: TOPIC GROUP FIRST SECOND. The topic holds FIRST records (test data 0..FIRST-1).
//  1. Member a joins alone, consumes all FIRST records and commits.
//  2. Member b joins: the group rebalances (cooperative-sticky, kgo's default) until the
//     partitions are split between a and b; the group is described (two members).
//  3. SECOND more records are produced; a and b consume them, each from its own partitions only
//     (b starts from a's committed offsets), and commit.
//  4. b leaves: a owns every partition again; the group is described (one member).
func groupScenario(ctx context.Context, args []string) error {
	topic, group := args[0], args[1]
	first, err := argInt(args, 2)
	if err != nil {
		return err
	}
	second, err := argInt(args, 3)
	if err != nil {
		return err
	}
	adm, err := kadm.NewOptClient(baseOpts("gocheck-group-admin")...)
	if err != nil {
		return err
	}
	defer adm.Close()
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	numPartitions := len(topics[topic].Partitions)

	a, err := newMember("a", topic, group)
	if err != nil {
		return err
	}
	defer a.cl.Close()
	got, err := pollUntil(ctx, a.cl, "a", first, opTimeout, 300*time.Millisecond)
	if err != nil {
		return err
	}
	emit(obj{"event": "member_consumed", "phase": "alone", "member": "a", "count": got})
	if err := commit(ctx, a); err != nil {
		return err
	}
	emitAssignment("alone", a)

	b, err := newMember("b", topic, group)
	if err != nil {
		return err
	}
	bClosed := false
	defer func() {
		if !bClosed {
			b.cl.Close()
		}
	}()
	if err := awaitAssignment(ctx, splitAmong(numPartitions), a, b); err != nil {
		return err
	}
	emitAssignment("joined", a, b)
	emit(obj{"event": "group_described", "phase": "joined", "group": group,
		"description": describeGroupJSON(ctx, adm, group)})

	if err := produceMore(ctx, topic, first, second); err != nil {
		return err
	}
	// Poll both until the SECOND records are in, then a quiet round for anything extra.
	counts := map[string]int{}
	deadline := time.Now().Add(opTimeout)
	for counts["a"]+counts["b"] < second && time.Now().Before(deadline) {
		for _, m := range []*member{a, b} {
			c := counts[m.name]
			if err := pollOnce(ctx, m.cl, m.name, 100*time.Millisecond, &c); err != nil {
				return err
			}
			counts[m.name] = c
		}
	}
	for _, m := range []*member{a, b} {
		c := counts[m.name]
		if err := pollOnce(ctx, m.cl, m.name, 300*time.Millisecond, &c); err != nil {
			return err
		}
		counts[m.name] = c
		emit(obj{"event": "member_consumed", "phase": "joined", "member": m.name, "count": c})
		if err := commit(ctx, m); err != nil {
			return err
		}
	}

	b.cl.Close() // leaves the group (LeaveGroup), so a is given every partition again
	bClosed = true
	if err := awaitAssignment(ctx, splitAmong(numPartitions), a); err != nil {
		return err
	}
	emitAssignment("left", a)
	emit(obj{"event": "group_described", "phase": "left", "group": group,
		"description": describeGroupJSON(ctx, adm, group)})
	return nil
}

// produceMore writes test records first..first+n-1 to topic with an idempotent producer.
func produceMore(ctx context.Context, topic string, first, n int) error {
	cl, err := kgo.NewClient(baseOpts("gocheck-group-producer")...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return cl.ProduceSync(ctx, keyedRecords(topic, first, n, time.Now().UnixMilli())...).FirstErr()
}
