// Runs Apache Kafka's own AdminUtils.assignReplicasToBrokers (kafka-server-common on the
// classpath) on the cases read from stdin and prints its answers, for
// tests/integration/test_replica_assignment_vs_kafka.py to compare with kafkalite's.
//
// Input, one case a line: nPartitions replicationFactor fixedStartIndex startPartitionId brokers
// where brokers is id:rack,id:rack,... and rack "-" means none.
// Output, one line a case: p=b,b;p=b,b (partitions ascending), or ERR <exception class> <message>.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.apache.kafka.admin.AdminUtils;
import org.apache.kafka.admin.BrokerMetadata;

public class AssignReplicasCheck {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] f = line.trim().split(" ");
            List<BrokerMetadata> brokers = new ArrayList<>();
            if (f.length > 4) {
                for (String b : f[4].split(",")) {
                    String[] idRack = b.split(":", 2);
                    Optional<String> rack = idRack[1].equals("-") ? Optional.empty() : Optional.of(idRack[1]);
                    brokers.add(new BrokerMetadata(Integer.parseInt(idRack[0]), rack));
                }
            }
            try {
                Map<Integer, List<Integer>> assignment = AdminUtils.assignReplicasToBrokers(brokers,
                    Integer.parseInt(f[0]), Integer.parseInt(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]));
                StringBuilder sb = new StringBuilder();
                for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(assignment).entrySet()) {
                    if (sb.length() > 0) sb.append(';');
                    sb.append(e.getKey()).append('=');
                    for (int i = 0; i < e.getValue().size(); i++) {
                        if (i > 0) sb.append(',');
                        sb.append(e.getValue().get(i));
                    }
                }
                out.append(sb).append('\n');
            } catch (RuntimeException e) {
                out.append("ERR ").append(e.getClass().getSimpleName()).append(' ').append(e.getMessage()).append('\n');
            }
        }
        System.out.print(out);
    }
}
