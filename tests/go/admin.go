package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// withAdmin runs fn with a fresh kadm client (one per command, closed after it).
func withAdmin(ctx context.Context, fn func(ctx context.Context, adm *kadm.Client) error) error {
	adm, err := kadm.NewOptClient(baseOpts("gocheck-admin")...)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return fn(ctx, adm)
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
func createTopic(ctx context.Context, args []string) error {
	partitions, err := argInt(args, 1)
	if err != nil {
		return err
	}
	configs := map[string]*string{}
	for _, kv := range args[2:] {
		k, v, _ := strings.Cut(kv, "=")
		configs[k] = &v
	}
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		r, err := adm.CreateTopic(ctx, int32(partitions), -1, configs, args[0])
		if err != nil {
			return err
		}
		if r.Err != nil {
			return r.Err
		}
		emit(obj{"event": "created", "topic": r.Topic, "topicId": r.ID.String(),
			"numPartitions": r.NumPartitions, "replicationFactor": r.ReplicationFactor,
			"configs": len(r.Configs)})
		return nil
	})
}

func listTopics(ctx context.Context, _ []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		emit(obj{"event": "topics", "topics": topics.Names()})
		return nil
	})
}

func describeTopic(ctx context.Context, args []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		topics, err := adm.ListTopics(ctx, args[0])
		if err != nil {
			return err
		}
		d, ok := topics[args[0]]
		if !ok {
			return fmt.Errorf("topic %s missing from the metadata response", args[0])
		}
		if d.Err != nil {
			return d.Err
		}
		parts := []obj{}
		for _, p := range d.Partitions.Sorted() {
			if p.Err != nil {
				return p.Err
			}
			parts = append(parts, obj{"partition": p.Partition, "leader": p.Leader,
				"leaderEpoch": p.LeaderEpoch, "replicas": sortedInt32(p.Replicas),
				"isr": sortedInt32(p.ISR)})
		}
		emit(obj{"event": "described", "topic": d.Topic, "topicId": d.ID.String(),
			"internal": d.IsInternal, "partitions": parts})
		return nil
	})
}

func deleteTopic(ctx context.Context, args []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		r, err := adm.DeleteTopic(ctx, args[0])
		if err != nil {
			return err
		}
		if r.Err != nil {
			return r.Err
		}
		emit(obj{"event": "deleted", "topic": r.Topic, "topicId": r.ID.String()})
		return nil
	})
}

// describeConfigs: TOPIC KEY[,KEY...]; each key's value, source and synonyms' sources.
func describeConfigs(ctx context.Context, args []string) error {
	keys := strings.Split(args[1], ",")
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.DescribeTopicConfigs(ctx, args[0])
		if err != nil {
			return err
		}
		r, err := rs.On(args[0], nil)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return r.Err
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
		emit(obj{"event": "configs", "topic": args[0], "count": len(r.Configs), "configs": out})
		return nil
	})
}

// alterConfigs: TOPIC OP:KEY[=VALUE] ...; IncrementalAlterConfigs through kadm.
func alterConfigs(ctx context.Context, args []string) error {
	ops := map[string]kadm.IncrementalOp{"set": kadm.SetConfig, "delete": kadm.DeleteConfig,
		"append": kadm.AppendConfig, "subtract": kadm.SubtractConfig}
	var alters []kadm.AlterConfig
	for _, a := range args[1:] {
		opName, kv, _ := strings.Cut(a, ":")
		op, ok := ops[opName]
		if !ok {
			return fmt.Errorf("unknown op %q", opName)
		}
		k, v, hasValue := strings.Cut(kv, "=")
		alter := kadm.AlterConfig{Op: op, Name: k}
		if hasValue {
			alter.Value = &v
		}
		alters = append(alters, alter)
	}
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.AlterTopicConfigs(ctx, alters, args[0])
		if err != nil {
			return err
		}
		r, err := rs.On(args[0], nil)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
		emit(obj{"event": "altered", "topic": args[0], "count": len(alters)})
		return nil
	})
}

// createPartitions: TOPIC TOTAL (CreatePartitions with the new total count).
func createPartitions(ctx context.Context, args []string) error {
	total, err := argInt(args, 1)
	if err != nil {
		return err
	}
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.UpdatePartitions(ctx, total, args[0])
		if err != nil {
			return err
		}
		r, ok := rs[args[0]]
		if !ok {
			return fmt.Errorf("no CreatePartitions result for %s", args[0])
		}
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
		emit(obj{"event": "partitions_created", "topic": args[0], "total": total})
		return nil
	})
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
func listOffsets(ctx context.Context, args []string) error {
	millis, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return err
	}
	topic := args[0]
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
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
				return err
			}
			if report[l.name], err = offsetsJSON(listed, topic); err != nil {
				return err
			}
		}
		emit(report)
		return nil
	})
}

// deleteRecords: TOPIC PARTITION=OFFSET[,...]; the new low watermark of each partition.
func deleteRecords(ctx context.Context, args []string) error {
	topic := args[0]
	offsets := kadm.Offsets{}
	for _, po := range strings.Split(args[1], ",") {
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
		rs, err := adm.DeleteRecords(ctx, offsets)
		if err != nil {
			return err
		}
		low := obj{}
		for p, r := range rs[topic] {
			if r.Err != nil {
				return fmt.Errorf("partition %d: %w", p, r.Err)
			}
			low[partitionKey(p)] = r.LowWatermark
		}
		emit(obj{"event": "records_deleted", "topic": topic, "lowWatermarks": low})
		return nil
	})
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

func describeGroup(ctx context.Context, args []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		emit(obj{"event": "group_described", "group": args[0], "description": describeGroupJSON(ctx, adm, args[0])})
		return nil
	})
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

func listGroups(ctx context.Context, _ []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		ls, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		groups := []obj{}
		for _, g := range ls.Sorted() {
			groups = append(groups, obj{"group": g.Group, "protocolType": g.ProtocolType,
				"state": g.State, "coordinator": g.Coordinator})
		}
		emit(obj{"event": "groups", "groups": groups})
		return nil
	})
}

// groupOffsets: GROUP; the committed offsets (OffsetFetch) as {"topic-partition": offset}.
func groupOffsets(ctx context.Context, args []string) error {
	return withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.FetchOffsets(ctx, args[0])
		if err != nil {
			return err
		}
		offsets := obj{}
		for t, ps := range rs {
			for p, r := range ps {
				if r.Err != nil {
					return fmt.Errorf("%s-%d: %w", t, p, r.Err)
				}
				offsets[fmt.Sprintf("%s-%d", t, p)] = r.At
			}
		}
		emit(obj{"event": "group_offsets", "group": args[0], "offsets": offsets})
		return nil
	})
}
