// Command gocheck drives franz-go (kgo and kadm) against a broker and prints one JSON object per
// line on stdout, so a Python test (tests/integration/test_go_client.py) can assert exact outcomes.
// It is the Go counterpart of tests/java/ClientCheck.java.
//
// Usage: gocheck BOOTSTRAP "cmd arg..." ["cmd arg..." ...]
//
// Every command runs even if an earlier one failed (a failure prints an "error" line); the exit code
// is 1 if any command failed. The commands are listed in commands() below. A watchdog (flag
// -deadline) prints where the program was stuck and exits 3, so a client call that retries
// forever cannot hang the test.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// opTimeout bounds one client call (a produce, an admin request, a wait for records).
const opTimeout = 20 * time.Second

var (
	bootstrap string
	logLevel  = kgo.LogLevelWarn
	emitMu    sync.Mutex
)

type obj = map[string]any

// emit prints one JSON object per line; client callbacks report from their own goroutines.
func emit(m obj) {
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(obj{"event": "error", "cmd": "emit", "error": err.Error()})
	}
	emitMu.Lock()
	defer emitMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

// hexOrNil renders bytes as hex, keeping a null (nil) distinct from an empty value.
func hexOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return hex.EncodeToString(b)
}

// stringOrNil keeps a null key or value null in the report.
func stringOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// errorName is Kafka's name of a broker error code (kerr's Message, e.g. "TOPIC_ALREADY_EXISTS"),
// or the Go error text for anything else.
func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// baseOpts are what every client of this program uses: the bootstrap broker, a client id, and
// franz-go's own logger on stderr so a failing test shows what the client complained about.
func baseOpts(clientID string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID(clientID),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel, func() string {
			return time.Now().Format("15:04:05.000 ") + clientID + " "
		})),
		kgo.RequestTimeoutOverhead(5 * time.Second),
	}
}

type command func(ctx context.Context, args []string) error

func commands() map[string]command {
	return map[string]command{
		// admin (kadm), admin.go
		"create-topic":      admin(createTopic),      // TOPIC PARTITIONS [key=value ...]
		"list-topics":       admin(listTopics),       //
		"describe-topic":    admin(describeTopic),    // TOPIC
		"delete-topic":      admin(deleteTopic),      // TOPIC
		"describe-configs":  admin(describeConfigs),  // TOPIC KEY[,KEY...]
		"alter-configs":     admin(alterConfigs),     // TOPIC OP:KEY[=VALUE] ... (OP set|delete|append|subtract)
		"create-partitions": admin(createPartitions), // TOPIC TOTAL
		"list-offsets":      admin(listOffsets),      // TOPIC MILLIS
		"delete-records":    admin(deleteRecords),    // TOPIC PARTITION=OFFSET[,PARTITION=OFFSET...]
		"describe-group":    admin(describeGroup),    // GROUP
		"list-groups":       admin(listGroups),       //
		"group-offsets":     admin(groupOffsets),     // GROUP
		// admin_more.go
		"describe-txn":       admin(describeTxn),       // TRANSACTIONAL_ID
		"list-txns":          admin(listTxns),          //
		"describe-producers": admin(describeProducers), // TOPIC
		"commit-offsets":     admin(commitOffsets),     // GROUP TOPIC PARTITION=OFFSET[,...]
		"delete-offsets":     admin(deleteOffsets),     // GROUP TOPIC
		"delete-group":       admin(deleteGroup),       // GROUP
		// producer and consumer (kgo), records.go
		"produce": produce, // TOPIC N COMPRESSION ACKS BASE_TS
		"consume": consume, // TOPIC N TIMEOUT_MS ISOLATION
		// consumer groups, group.go
		"group": groupScenario, // TOPIC GROUP FIRST SECOND
		// transactions, txn.go
		"txn": transaction, // TOPIC TRANSACTIONAL_ID N TAG commit|abort
		"eos": eos,         // SRC DST GROUP TRANSACTIONAL_ID N
	}
}

// run executes one command line; "expect-error NAME CMD ..." succeeds only if CMD fails with the
// Kafka error NAME.
func run(ctx context.Context, line string) error {
	args := strings.Fields(line)
	if len(args) == 0 {
		return errors.New("empty command")
	}
	if args[0] == "expect-error" {
		if len(args) < 3 {
			return errors.New("usage: expect-error NAME CMD ...")
		}
		err := run(ctx, strings.Join(args[2:], " "))
		if err == nil {
			return fmt.Errorf("%s succeeded, expected %s", args[2], args[1])
		}
		if got := errorName(err); got != args[1] {
			return fmt.Errorf("%s failed with %s (%v), expected %s", args[2], got, err, args[1])
		}
		emit(obj{"event": "expected_error", "cmd": strings.Join(args[2:], " "), "error": args[1],
			"message": err.Error()})
		return nil
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q", args[0])
	}
	return cmd(ctx, args[1:])
}

// startWatchdog reports every goroutine's stack and exits once the deadline passes.
func startWatchdog(deadline time.Duration) {
	time.AfterFunc(deadline, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		emit(obj{"event": "error", "cmd": "watchdog", "error": "Deadline",
			"message": fmt.Sprintf("still running after %s", deadline), "trace": string(buf[:n])})
		os.Exit(3)
	})
}

func main() {
	deadline := flag.Duration("deadline", 80*time.Second, "exit after this long, reporting stacks")
	debug := flag.Bool("debug", false, "franz-go logs at DEBUG (every request) instead of WARN")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, `usage: gocheck [-deadline D] [-debug] BOOTSTRAP "cmd arg..." ...`)
		os.Exit(2)
	}
	if *debug {
		logLevel = kgo.LogLevelDebug
	}
	startWatchdog(*deadline)
	bootstrap = flag.Arg(0)
	failures := 0
	for _, line := range flag.Args()[1:] {
		start := time.Now()
		if err := run(context.Background(), line); err != nil {
			failures++
			emit(obj{"event": "error", "cmd": line, "error": errorName(err), "message": err.Error()})
			continue
		}
		emit(obj{"event": "done", "cmd": line, "ms": time.Since(start).Milliseconds()})
	}
	if failures > 0 {
		os.Exit(1)
	}
}
