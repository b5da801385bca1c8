package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// codecNames by the record batch attributes' compression bits.
var codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// valueFor is record i's value: text with non-ASCII characters, every tenth (i%10 == 7) a null.
func valueFor(i int) []byte {
	if i%10 == 7 {
		return nil
	}
	return []byte(fmt.Sprintf("v-%d-\u00e9\u6f22\u5b57", i))
}

// headersFor is record i's headers: a repeated key, binary bytes and a null value.
func headersFor(i int) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: "idx", Value: []byte(strconv.Itoa(i))},
		{Key: "bin", Value: []byte{0, 1, 2, 0xff}},
		{Key: "dup", Value: []byte("a")},
		{Key: "dup", Value: []byte("b")},
		{Key: "nil", Value: nil},
	}
}

// keyedRecords are records first..first+n-1 of the test data for topic, timestamps baseTs+i.
func keyedRecords(topic string, first, n int, baseTs int64) []*kgo.Record {
	rs := make([]*kgo.Record, 0, n)
	for i := first; i < first+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("k-" + strconv.Itoa(i)), Value: valueFor(i),
			Headers: headersFor(i), Timestamp: time.UnixMilli(baseTs + int64(i))})
	}
	return rs
}

func acksOpts(acks string) ([]kgo.Opt, error) {
	switch acks {
	case "all": // kgo's default: idempotent, acks=all
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
	case "1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, nil
	case "0":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}, nil
	}
	return nil, fmt.Errorf("unknown acks %q", acks)
}

// produce: TOPIC N COMPRESSION ACKS BASE_TS; one ProduceSync of records 0..N-1 (keyed, so the
// default partitioner hashes them with murmur2 as the Java client does).
func produce(ctx context.Context, args []string) error {
	n, err := argInt(args, 1)
	if err != nil {
		return err
	}
	codec, ok := codecs[args[2]]
	if !ok {
		return fmt.Errorf("unknown compression %q", args[2])
	}
	ackOpts, err := acksOpts(args[3])
	if err != nil {
		return err
	}
	baseTs, err := strconv.ParseInt(args[4], 10, 64)
	if err != nil {
		return err
	}
	opts := append(baseOpts("gocheck-producer"), kgo.ProducerBatchCompression(codec))
	cl, err := kgo.NewClient(append(opts, ackOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	records := keyedRecords(args[0], 0, n, baseTs)
	// ProduceSync lists results in the order the partitions' batches were answered.
	index := make(map[*kgo.Record]int, n)
	for i, r := range records {
		index[r] = i
	}
	results := cl.ProduceSync(ctx, records...)
	sort.Slice(results, func(x, y int) bool { return index[results[x].Record] < index[results[y].Record] })
	for i, r := range results {
		if r.Err != nil {
			return fmt.Errorf("record %d: %w", i, r.Err)
		}
		emit(obj{"event": "sent", "i": i, "topic": r.Record.Topic, "key": string(r.Record.Key),
			"partition": r.Record.Partition, "offset": r.Record.Offset,
			"timestamp": r.Record.Timestamp.UnixMilli(), "producerId": r.Record.ProducerID,
			"producerEpoch": r.Record.ProducerEpoch})
	}
	emit(obj{"event": "produced", "topic": args[0], "count": n, "compression": args[2], "acks": args[3]})
	return nil
}

// recordJSON is one consumed record as the report shows it.
func recordJSON(r *kgo.Record, consumer string) obj {
	headers := [][]any{}
	for _, h := range r.Headers {
		headers = append(headers, []any{h.Key, hexOrNil(h.Value)})
	}
	tsType := "CREATE_TIME"
	if r.Attrs.TimestampType() == 1 {
		tsType = "LOG_APPEND_TIME"
	}
	codec := "unknown"
	if c := int(r.Attrs.CompressionType()); c < len(codecNames) {
		codec = codecNames[c]
	}
	return obj{"event": "record", "consumer": consumer, "topic": r.Topic, "partition": r.Partition,
		"offset": r.Offset, "key": stringOrNil(r.Key), "value": stringOrNil(r.Value), "headers": headers,
		"timestamp": r.Timestamp.UnixMilli(), "timestampType": tsType, "leaderEpoch": r.LeaderEpoch,
		"producerId": r.ProducerID, "producerEpoch": r.ProducerEpoch, "compression": codec,
		"transactional": r.Attrs.IsTransactional()}
}

// pollUntil polls cl, reporting each record as consumer, until want records came or the timeout
// passes; then polls quietPeriod more, so a record beyond the expected ones is seen too.
func pollUntil(ctx context.Context, cl *kgo.Client, consumer string, want int, timeout,
	quietPeriod time.Duration) (int, error) {
	count := 0
	deadline := time.Now().Add(timeout)
	for count < want && time.Now().Before(deadline) {
		if err := pollOnce(ctx, cl, consumer, time.Until(deadline), &count); err != nil {
			return count, err
		}
	}
	if err := pollOnce(ctx, cl, consumer, quietPeriod, &count); err != nil {
		return count, err
	}
	return count, nil
}

func pollOnce(ctx context.Context, cl *kgo.Client, consumer string, wait time.Duration, count *int) error {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fetches := cl.PollFetches(pctx)
	for _, fe := range fetches.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) {
			return fmt.Errorf("fetch %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	fetches.EachRecord(func(r *kgo.Record) {
		*count++
		emit(recordJSON(r, consumer))
	})
	return nil
}

func isolation(name string) (kgo.IsolationLevel, error) {
	switch name {
	case "read_committed":
		return kgo.ReadCommitted(), nil
	case "read_uncommitted":
		return kgo.ReadUncommitted(), nil
	}
	return kgo.IsolationLevel{}, fmt.Errorf("unknown isolation %q", name)
}

// consume: TOPIC N TIMEOUT_MS ISOLATION; every partition from the start, no group.
func consume(ctx context.Context, args []string) error {
	n, err := argInt(args, 1)
	if err != nil {
		return err
	}
	timeoutMs, err := argInt(args, 2)
	if err != nil {
		return err
	}
	level, err := isolation(args[3])
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(baseOpts("gocheck-consumer"), kgo.ConsumeTopics(args[0]),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	count, err := pollUntil(ctx, cl, args[3], n, time.Duration(timeoutMs)*time.Millisecond, 500*time.Millisecond)
	if err != nil {
		return err
	}
	emit(obj{"event": "consumed", "topic": args[0], "isolation": args[3], "count": count, "expected": n})
	if count != n {
		return fmt.Errorf("consumed %d records, expected %d", count, n)
	}
	return nil
}
