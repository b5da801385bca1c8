package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// adminFunc is one admin command: it makes its requests with adm and returns the one JSON object
// the command reports.
type adminFunc func(ctx context.Context, adm *kadm.Client, args []string) (obj, error)

// admin makes a command of fn: a fresh kadm client (one per command, closed after it), the
// requests bounded by opTimeout, and fn's report emitted once fn succeeds.
func admin(fn adminFunc) command {
	return func(ctx context.Context, args []string) error {
		adm, err := kadm.NewOptClient(baseOpts("gocheck-admin")...)
		if err != nil {
			return err
		}
		defer adm.Close()
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		report, err := fn(ctx, adm, args)
		if err != nil {
			return err
		}
		emit(report)
		return nil
	}
}

// resultFor is the result a kadm response keyed by name holds for name, or an error saying the
// request's response left it out.
func resultFor[R any](rs map[string]R, name, request string) (R, error) {
	r, ok := rs[name]
	if !ok {
		return r, fmt.Errorf("no %s result for %s", request, name)
	}
	return r, nil
}

// topicPartitions is every partition of topic, as a set for the requests that take one.
func topicPartitions(ctx context.Context, adm *kadm.Client, topic string) (kadm.TopicsSet, error) {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	set.Add(topic, topics[topic].Partitions.Numbers()...)
	return set, nil
}

// parseOffsets reads PARTITION=OFFSET[,...] as offsets of topic (no leader epoch).
func parseOffsets(topic, spec string) (kadm.Offsets, error) {
	offsets := kadm.Offsets{}
	for _, po := range strings.Split(spec, ",") {
		p, o, _ := strings.Cut(po, "=")
		pi, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		oi, err := strconv.ParseInt(o, 10, 64)
		if err != nil {
			return nil, err
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: int32(pi), At: oi, LeaderEpoch: -1})
	}
	return offsets, nil
}

func argInt(args []string, i int) (int, error) {
	if i >= len(args) {
		return 0, fmt.Errorf("missing argument %d", i+1)
	}
	return strconv.Atoi(args[i])
}

func sortedInt32(xs []int32) []int32 {
	out := append([]int32(nil), xs...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// partitionKey is how per-partition maps are keyed in the JSON report (object keys are strings).
func partitionKey(p int32) string { return strconv.Itoa(int(p)) }

// createTopic: TOPIC PARTITIONS [key=value ...]; the replication factor is left to the broker (-1,
// CreateTopics v4+), which must answer 1 for a single broker.
func createTopic(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	partitions, err := argInt(args, 1)
	if err != nil {
		return nil, err
	}
	configs := map[string]*string{}
	for _, kv := range args[2:] {
		k, v, _ := strings.Cut(kv, "=")
		configs[k] = &v
	}
	r, err := adm.CreateTopic(ctx, int32(partitions), -1, configs, args[0])
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return obj{"event": "created", "topic": r.Topic, "topicId": r.ID.String(),
		"numPartitions": r.NumPartitions, "replicationFactor": r.ReplicationFactor,
		"configs": len(r.Configs)}, nil
}

func listTopics(ctx context.Context, adm *kadm.Client, _ []string) (obj, error) {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	return obj{"event": "topics", "topics": topics.Names()}, nil
}

func describeTopic(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	topics, err := adm.ListTopics(ctx, args[0])
	if err != nil {
		return nil, err
	}
	d, err := resultFor(topics, args[0], "Metadata")
	if err != nil {
		return nil, err
	}
	if d.Err != nil {
		return nil, d.Err
	}
	parts := []obj{}
	for _, p := range d.Partitions.Sorted() {
		if p.Err != nil {
			return nil, p.Err
		}
		parts = append(parts, obj{"partition": p.Partition, "leader": p.Leader,
			"leaderEpoch": p.LeaderEpoch, "replicas": sortedInt32(p.Replicas),
			"isr": sortedInt32(p.ISR)})
	}
	return obj{"event": "described", "topic": d.Topic, "topicId": d.ID.String(),
		"internal": d.IsInternal, "partitions": parts}, nil
}

func deleteTopic(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	r, err := adm.DeleteTopic(ctx, args[0])
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return obj{"event": "deleted", "topic": r.Topic, "topicId": r.ID.String()}, nil
}

// describeConfigs: TOPIC KEY[,KEY...]; each key's value, source and synonyms' sources.
func describeConfigs(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	keys := strings.Split(args[1], ",")
	rs, err := adm.DescribeTopicConfigs(ctx, args[0])
	if err != nil {
		return nil, err
	}
	r, err := rs.On(args[0], nil)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	byKey := map[string]kadm.Config{}
	for _, c := range r.Configs {
		byKey[c.Key] = c
	}
	out := obj{}
	for _, k := range keys {
		c, ok := byKey[k]
		if !ok {
			out[k] = nil
			continue
		}
		synonyms := []string{}
		for _, s := range c.Synonyms {
			synonyms = append(synonyms, s.Source.String())
		}
		out[k] = obj{"value": c.Value, "source": c.Source.String(), "synonyms": synonyms}
	}
	return obj{"event": "configs", "topic": args[0], "count": len(r.Configs), "configs": out}, nil
}

// alterConfigs: TOPIC OP:KEY[=VALUE] ...; IncrementalAlterConfigs through kadm.
func alterConfigs(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	ops := map[string]kadm.IncrementalOp{"set": kadm.SetConfig, "delete": kadm.DeleteConfig,
		"append": kadm.AppendConfig, "subtract": kadm.SubtractConfig}
	var alters []kadm.AlterConfig
	for _, a := range args[1:] {
		opName, kv, _ := strings.Cut(a, ":")
		op, ok := ops[opName]
		if !ok {
			return nil, fmt.Errorf("unknown op %q", opName)
		}
		k, v, hasValue := strings.Cut(kv, "=")
		alter := kadm.AlterConfig{Op: op, Name: k}
		if hasValue {
			alter.Value = &v
		}
		alters = append(alters, alter)
	}
	rs, err := adm.AlterTopicConfigs(ctx, alters, args[0])
	if err != nil {
		return nil, err
	}
	r, err := rs.On(args[0], nil)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
	}
	return obj{"event": "altered", "topic": args[0], "count": len(alters)}, nil
}

// createPartitions: TOPIC TOTAL (CreatePartitions with the new total count).
func createPartitions(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	total, err := argInt(args, 1)
	if err != nil {
		return nil, err
	}
	rs, err := adm.UpdatePartitions(ctx, total, args[0])
	if err != nil {
		return nil, err
	}
	r, err := resultFor(rs, args[0], "CreatePartitions")
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
	}
	return obj{"event": "partitions_created", "topic": args[0], "total": total}, nil
}

// offsetsJSON renders one topic's listed offsets as {partition: [offset, timestamp, epoch]}.
func offsetsJSON(l kadm.ListedOffsets, topic string) (obj, error) {
	out := obj{}
	for p, o := range l[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, o.Err)
		}
		out[partitionKey(p)] = []int64{o.Offset, o.Timestamp, int64(o.LeaderEpoch)}
	}
	return out, nil
}

// listOffsets: TOPIC MILLIS; start, end (read_uncommitted), committed (read_committed end, the
// LSO) and the first offset at or after MILLIS, per partition.
func listOffsets(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	millis, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return nil, err
	}
	topic := args[0]
	report := obj{"event": "list_offsets", "topic": topic, "millis": millis}
	lists := []struct {
		name string
		list func(context.Context, ...string) (kadm.ListedOffsets, error)
	}{
		{"start", adm.ListStartOffsets}, {"end", adm.ListEndOffsets},
		{"committed", adm.ListCommittedOffsets},
		{"after", func(ctx context.Context, ts ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, millis, ts...)
		}},
	}
	for _, l := range lists {
		listed, err := l.list(ctx, topic)
		if err != nil {
			return nil, err
		}
		if report[l.name], err = offsetsJSON(listed, topic); err != nil {
			return nil, err
		}
	}
	return report, nil
}

// deleteRecords: TOPIC PARTITION=OFFSET[,...]; the new low watermark of each partition.
func deleteRecords(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	topic := args[0]
	offsets, err := parseOffsets(topic, args[1])
	if err != nil {
		return nil, err
	}
	rs, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		return nil, err
	}
	low := obj{}
	for p, r := range rs[topic] {
		if r.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, r.Err)
		}
		low[partitionKey(p)] = r.LowWatermark
	}
	return obj{"event": "records_deleted", "topic": topic, "lowWatermarks": low}, nil
}

// memberJSON is one described member: ids and the partitions assigned to it, by topic.
func memberJSON(m kadm.DescribedGroupMember) obj {
	assigned := obj{}
	if c, ok := m.Assigned.AsConsumer(); ok {
		for _, t := range c.Topics {
			assigned[t.Topic] = sortedInt32(t.Partitions)
		}
	}
	var topics []string
	if c, ok := m.Join.AsConsumer(); ok {
		topics = append(topics, c.Topics...)
	}
	return obj{"memberId": m.MemberID, "clientId": m.ClientID, "clientHost": m.ClientHost,
		"instanceId": m.InstanceID, "assigned": assigned, "subscribed": topics}
}

func describeGroup(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	return obj{"event": "group_described", "group": args[0], "description": describeGroupJSON(ctx, adm, args[0])}, nil
}

// describeGroupJSON is DescribeGroups for one group as the report shows it (errors included,
// since a described error is an outcome to assert, not a failure of the command).
func describeGroupJSON(ctx context.Context, adm *kadm.Client, group string) obj {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return obj{"error": errorName(err)}
	}
	d, err := ds.On(group, nil)
	if err != nil {
		return obj{"error": errorName(err)}
	}
	members := []obj{}
	for _, m := range d.Members {
		members = append(members, memberJSON(m))
	}
	out := obj{"state": d.State, "protocolType": d.ProtocolType, "protocol": d.Protocol,
		"coordinator": d.Coordinator.NodeID, "members": members, "error": nil}
	if d.Err != nil {
		out["error"] = errorName(d.Err)
	}
	return out
}

func listGroups(ctx context.Context, adm *kadm.Client, _ []string) (obj, error) {
	ls, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	groups := []obj{}
	for _, g := range ls.Sorted() {
		groups = append(groups, obj{"group": g.Group, "protocolType": g.ProtocolType,
			"state": g.State, "coordinator": g.Coordinator})
	}
	return obj{"event": "groups", "groups": groups}, nil
}

// groupOffsets: GROUP; the committed offsets (OffsetFetch) as {"topic-partition": offset}.
func groupOffsets(ctx context.Context, adm *kadm.Client, args []string) (obj, error) {
	rs, err := adm.FetchOffsets(ctx, args[0])
	if err != nil {
		return nil, err
	}
	offsets := obj{}
	for t, ps := range rs {
		for p, r := range ps {
			if r.Err != nil {
				return nil, fmt.Errorf("%s-%d: %w", t, p, r.Err)
			}
			offsets[fmt.Sprintf("%s-%d", t, p)] = r.At
		}
	}
	return obj{"event": "group_offsets", "group": args[0], "offsets": offsets}, nil
}
