package main

import (
	"context"
	"fmt"

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
func describeTxn(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	ds, err := adm.DescribeTransactions(ctx, args[0])
	if err != nil {
		return nil, err
	}
	d, err := resultFor(ds, args[0], "DescribeTransactions")
	if err != nil {
		return nil, err
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return obj{"event": "txn_described", "transactionalId": d.TxnID, "state": d.State,
		"producerId": d.ProducerID, "producerEpoch": d.ProducerEpoch, "timeoutMs": d.TimeoutMillis,
		"started": d.StartTimestamp > 0, "coordinator": d.Coordinator, "topics": topicsSetJSON(d.Topics)}, nil
}

// listTxns: ListTransactions (no filters) through kadm.
func listTxns(ctx context.Context, adm *kadm.Client, _ []string) (obj, error) {
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, err
	}
	txns := []obj{}
	for _, l := range ls.Sorted() {
		txns = append(txns, obj{"transactionalId": l.TxnID, "producerId": l.ProducerID,
			"state": l.State, "coordinator": l.Coordinator})
	}
	return obj{"event": "txns", "transactions": txns}, nil
}

// describeProducers: TOPIC; DescribeProducers of every partition of the topic.
func describeProducers(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	topic := args[0]
	set, err := topicPartitions(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	ds, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	partitions := obj{}
	for _, p := range ds.SortedPartitions() {
		if p.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p.Partition, p.Err)
		}
		producers := []obj{}
		for _, d := range p.ActiveProducers.Sorted() {
			producers = append(producers, obj{"producerId": d.ProducerID, "producerEpoch": d.ProducerEpoch,
				"lastSequence": d.LastSequence, "coordinatorEpoch": d.CoordinatorEpoch,
				"currentTxnStartOffset": d.CurrentTxnStartOffset})
		}
		partitions[partitionKey(p.Partition)] = producers
	}
	return obj{"event": "producers", "topic": topic, "partitions": partitions}, nil
}

// commitOffsets: GROUP TOPIC PARTITION=OFFSET[,...]; OffsetCommit as an admin does it (no
// member, generation -1), which a group without members accepts.
func commitOffsets(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	group, topic := args[0], args[1]
	offsets, err := parseOffsets(topic, args[2])
	if err != nil {
		return nil, err
	}
	if err := adm.CommitAllOffsets(ctx, group, offsets); err != nil {
		return nil, err
	}
	return obj{"event": "offsets_committed", "group": group, "topic": topic}, nil
}

// deleteOffsets: GROUP TOPIC; OffsetDelete of every partition of the topic, per-partition errors
// reported (they are outcomes: GROUP_SUBSCRIBED_TO_TOPIC for a live subscription).
func deleteOffsets(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	group, topic := args[0], args[1]
	set, err := topicPartitions(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	rs, err := adm.DeleteOffsets(ctx, group, set)
	if err != nil {
		return nil, err
	}
	errs := obj{}
	for p, e := range rs[topic] {
		errs[partitionKey(p)] = nil
		if e != nil {
			errs[partitionKey(p)] = errorName(e)
		}
	}
	return obj{"event": "offsets_deleted", "group": group, "topic": topic, "errors": errs}, nil
}

// deleteGroup: GROUP; DeleteGroups through kadm.
func deleteGroup(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	r, err := adm.DeleteGroup(ctx, args[0])
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return obj{"event": "group_deleted", "group": r.Group}, nil
}
