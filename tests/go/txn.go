package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// transaction: TOPIC TRANSACTIONAL_ID N TAG commit|abort; one transaction of N keyed records
// (values TAG-i), ended with a commit or an abort.
func transaction(ctx context.Context, args []string) error {
	topic, tid, tag := args[0], args[1], args[3]
	n, err := argInt(args, 2)
	if err != nil {
		return err
	}
	var end kgo.TransactionEndTry
	switch args[4] {
	case "commit":
		end = kgo.TryCommit
	case "abort":
		end = kgo.TryAbort
	default:
		return fmt.Errorf("expected commit or abort, got %q", args[4])
	}
	cl, err := kgo.NewClient(append(baseOpts("gocheck-txn"), kgo.TransactionalID(tid))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	records := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		records = append(records, &kgo.Record{Topic: topic, Key: []byte("k-" + strconv.Itoa(i)),
			Value: []byte(tag + "-" + strconv.Itoa(i))})
	}
	for _, r := range cl.ProduceSync(ctx, records...) {
		if r.Err != nil {
			return fmt.Errorf("record %s: %w", r.Record.Key, r.Err)
		}
		emit(obj{"event": "txn_sent", "tag": tag, "key": string(r.Record.Key), "partition": r.Record.Partition,
			"offset": r.Record.Offset, "producerId": r.Record.ProducerID,
			"producerEpoch": r.Record.ProducerEpoch})
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		return err
	}
	emit(obj{"event": "txn_ended", "tag": tag, "transactionalId": tid, "commit": bool(end)})
	return nil
}

// eos: SRC DST GROUP TRANSACTIONAL_ID N; a consume-transform-produce loop with kgo's
// GroupTransactSession: records of SRC (read_committed, as GROUP) are written to DST with their
// value upper-cased, and the consumed offsets committed in the same transaction, until N records
// went through committed transactions.
func eos(ctx context.Context, args []string) error {
	src, dst, group, tid := args[0], args[1], args[2], args[3]
	n, err := argInt(args, 4)
	if err != nil {
		return err
	}
	sess, err := kgo.NewGroupTransactSession(append(baseOpts("gocheck-eos"),
		kgo.TransactionalID(tid), kgo.ConsumerGroup(group), kgo.ConsumeTopics(src),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer sess.Close()
	done, transactions := 0, 0
	deadline := time.Now().Add(opTimeout)
	for done < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d records through committed transactions in %s", done, n, opTimeout)
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := sess.PollFetches(pctx)
		cancel()
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		var out []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			value := r.Value
			if value != nil {
				value = bytes.ToUpper(value)
			}
			out = append(out, &kgo.Record{Topic: dst, Key: r.Key, Value: value, Headers: r.Headers})
		})
		ectx, cancel := context.WithTimeout(ctx, opTimeout)
		if err := sess.ProduceSync(ectx, out...).FirstErr(); err != nil {
			cancel()
			return err
		}
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		if err != nil {
			return err
		}
		transactions++
		if committed {
			done += len(out)
		}
		emit(obj{"event": "eos_transaction", "records": len(out), "committed": committed})
	}
	emit(obj{"event": "eos_done", "records": done, "transactions": transactions})
	return nil
}
