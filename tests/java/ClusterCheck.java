import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * The Java admin client's view of a cluster, one JSON object per line on stdout (for
 * tests/cluster/test_cluster_metadata_clients.py).
 *
 * Usage: java ClusterCheck BOOTSTRAP "cmd arg..." ...
 *   describe-cluster          nodes (id, host, port, rack), controller, cluster id
 *   describe-topic TOPIC      per partition: leader (id, host, port), replicas, ISR
 */
public final class ClusterCheck {
    private static final long OP_TIMEOUT_MS = 20_000;
    private static String bootstrap;

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: ClusterCheck BOOTSTRAP \"cmd arg...\" ...");
            System.exit(2);
        }
        bootstrap = args[0];
        CheckSupport.startWatchdog("ClusterCheck", Long.getLong("clientcheck.deadline.ms", 80_000));
        int failures = CheckSupport.runAll(args, 1, ClusterCheck::run, ClusterCheck::unwrap);
        CheckSupport.OUT.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    private static void run(String[] c) throws Exception {
        switch (c[0]) {
            case "describe-cluster": describeCluster(); break;
            case "describe-topic": describeTopic(c[1]); break;
            default: throw new IllegalArgumentException("unknown command " + c[0]);
        }
    }

    private static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) OP_TIMEOUT_MS);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "clustercheck-admin");
        return Admin.create(p);
    }

    private static Map<String, Object> node(Node n) {
        return n == null ? null : CheckSupport.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack());
    }

    private static void describeCluster() throws Exception {
        try (Admin a = admin()) {
            DescribeClusterResult r = a.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : r.nodes().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) nodes.add(node(n));
            nodes.sort((x, y) -> Integer.compare((Integer) ((Map<?, ?>) x).get("id"), (Integer) ((Map<?, ?>) y).get("id")));
            CheckSupport.emit(CheckSupport.obj("event", "cluster", "nodes", nodes,
                    "controller", node(r.controller().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS)),
                    "clusterId", r.clusterId().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS)));
        }
    }

    private static void describeTopic(String topic) throws Exception {
        try (Admin a = admin()) {
            TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : d.partitions()) {
                parts.add(CheckSupport.obj("partition", pi.partition(), "leader", node(pi.leader()),
                        "replicas", ids(pi.replicas()), "isr", ids(pi.isr())));
            }
            CheckSupport.emit(CheckSupport.obj("event", "topic", "topic", d.name(),
                    "topicId", d.topicId().toString(), "partitions", parts));
        }
    }

    private static List<Integer> ids(Collection<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    private static Throwable unwrap(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null && t.getCause() != t) t = t.getCause();
        return t;
    }
}
