package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// topicsSetJSON renders a kadm.TopicsSet as {topic: [partitions, sorted]}.
func topicsSetJSON(s kadm.TopicsSet) obj {
	out := obj{}
	for t, ps := range s {
		var parts []int32
		for p := range ps {
			parts = append(parts, p)
		}
		out[t] = sortedInt32(parts)
	}
	return out
}

// describeTxn: TRANSACTIONAL_ID; DescribeTransactions through kadm.
func describeTxn(ctx context.Context, args []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		ds, err := adm.DescribeTransactions(ctx, args[0])
		if err != nil {
			return err
		}
		d, ok := ds[args[0]]
		if !ok {
			return fmt.Errorf("no description of %s", args[0])
		}
		if d.Err != nil {
			return d.Err
		}
		emit(obj{"event": "txn_described", "transactionalId": d.TxnID, "state": d.State,
			"producerId": d.ProducerID, "producerEpoch": d.ProducerEpoch, "timeoutMs": d.TimeoutMillis,
			"started": d.StartTimestamp > 0, "coordinator": d.Coordinator, "topics": topicsSetJSON(d.Topics)})
		return nil
	})
}

// listTxns: ListTransactions (no filters) through kadm.
func listTxns(ctx context.Context, _ []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		ls, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return err
		}
		txns := []obj{}
		for _, l := range ls.Sorted() {
			txns = append(txns, obj{"transactionalId": l.TxnID, "producerId": l.ProducerID,
				"state": l.State, "coordinator": l.Coordinator})
		}
		emit(obj{"event": "txns", "transactions": txns})
		return nil
	})
}

// describeProducers: TOPIC; DescribeProducers of every partition of the topic.
func describeProducers(ctx context.Context, args []string) error {
	topic := args[0]
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		set := kadm.TopicsSet{}
		set.Add(topic, topics[topic].Partitions.Numbers()...)
		ds, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return err
		}
		partitions := obj{}
		for _, p := range ds.SortedPartitions() {
			if p.Err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, p.Err)
			}
			producers := []obj{}
			for _, d := range p.ActiveProducers.Sorted() {
				producers = append(producers, obj{"producerId": d.ProducerID, "producerEpoch": d.ProducerEpoch,
					"lastSequence": d.LastSequence, "coordinatorEpoch": d.CoordinatorEpoch,
					"currentTxnStartOffset": d.CurrentTxnStartOffset})
			}
			partitions[partitionKey(p.Partition)] = producers
		}
		emit(obj{"event": "producers", "topic": topic, "partitions": partitions})
		return nil
	})
}

// commitOffsets: GROUP TOPIC PARTITION=OFFSET[,...]; OffsetCommit as an admin does it (no
// member, generation -1), which a group without members accepts.
func commitOffsets(ctx context.Context, args []string) error {
	group, topic := args[0], args[1]
	offsets := kadm.Offsets{}
	for _, po := range strings.Split(args[2], ",") {
		p, o, _ := strings.Cut(po, "=")
		pi, err := strconv.Atoi(p)
		if err != nil {
			return err
		}
		oi, err := strconv.ParseInt(o, 10, 64)
		if err != nil {
			return err
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: int32(pi), At: oi, LeaderEpoch: -1})
	}
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		if err := adm.CommitAllOffsets(ctx, group, offsets); err != nil {
			return err
		}
		emit(obj{"event": "offsets_committed", "group": group, "topic": topic})
		return nil
	})
}

// deleteOffsets: GROUP TOPIC; OffsetDelete of every partition of the topic, per-partition errors
// reported (they are outcomes: GROUP_SUBSCRIBED_TO_TOPIC for a live subscription).
func deleteOffsets(ctx context.Context, args []string) error {
	group, topic := args[0], args[1]
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		set := kadm.TopicsSet{}
		set.Add(topic, topics[topic].Partitions.Numbers()...)
		rs, err := adm.DeleteOffsets(ctx, group, set)
		if err != nil {
			return err
		}
		errs := obj{}
		for p, e := range rs[topic] {
			errs[partitionKey(p)] = nil
			if e != nil {
				errs[partitionKey(p)] = errorName(e)
			}
		}
		emit(obj{"event": "offsets_deleted", "group": group, "topic": topic, "errors": errs})
		return nil
	})
}

// deleteGroup: GROUP; DeleteGroups through kadm.
func deleteGroup(ctx context.Context, args []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		r, err := adm.DeleteGroup(ctx, args[0])
		if err != nil {
			return err
		}
		if r.Err != nil {
			return r.Err
		}
		emit(obj{"event": "group_deleted", "group": r.Group})
		return nil
	})
}
