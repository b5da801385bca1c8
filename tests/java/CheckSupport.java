import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.UnaryOperator;

/** What the Java check programs (ClientCheck, TxnCheck) share: the command loop, the watchdog
 * and the JSON-lines report on stdout. */
final class CheckSupport {
    static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    private CheckSupport() {}

    /** One command of a check program ("name arg arg ..."). */
    interface Command {
        void run(String[] cmd) throws Exception;
    }

    /** One JSON object per line; synchronized: client callbacks report from their own threads. */
    static synchronized void emit(Map<String, Object> m) {
        OUT.println(toJson(m));
    }

    /** Runs each command argument in turn, reporting "done" or "error" for each; returns the
     * number that failed. */
    static int runAll(String[] args, int first, Command command, UnaryOperator<Throwable> unwrap) {
        int failures = 0;
        for (int i = first; i < args.length; i++) {
            String[] cmd = args[i].trim().split("\\s+");
            long start = System.nanoTime();
            try {
                command.run(cmd);
                emit(obj("event", "done", "cmd", args[i], "ms", (System.nanoTime() - start) / 1_000_000));
            } catch (Throwable t) {
                failures++;
                Throwable root = unwrap.apply(t);
                emit(obj("event", "error", "cmd", args[i], "error", root.getClass().getName(),
                        "message", String.valueOf(root.getMessage()), "trace", stackHead(t)));
            }
        }
        OUT.flush();
        return failures;
    }

    /**
     * A client call that keeps retrying (e.g. metadata that never arrives) must not hang the test:
     * past the deadline, print an error line with the main thread's stack and exit.
     */
    static void startWatchdog(String program, long deadlineMs) {
        Thread main = Thread.currentThread();
        Thread w = new Thread(() -> {
            try {
                Thread.sleep(deadlineMs);
            } catch (InterruptedException e) {
                return;
            }
            StringBuilder st = new StringBuilder();
            for (StackTraceElement el : main.getStackTrace()) st.append(" | at ").append(el);
            emit(obj("event", "error", "cmd", "watchdog", "error", "Deadline",
                    "message", program + " still running after " + deadlineMs + " ms", "trace", st.toString()));
            OUT.flush();
            Runtime.getRuntime().halt(3);
        }, program.toLowerCase() + "-watchdog");
        w.setDaemon(true);
        w.start();
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static String hex(byte[] b) {
        if (b == null) return null;
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    /** The first frames of every cause, on one line. */
    static String stackHead(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable cur = t; cur != null; cur = cur.getCause() == cur ? null : cur.getCause()) {
            sb.append(cur.getClass().getName()).append(": ").append(cur.getMessage());
            StackTraceElement[] st = cur.getStackTrace();
            for (int i = 0; i < Math.min(4, st.length); i++) sb.append(" | at ").append(st[i]);
            sb.append(" || ");
        }
        return sb.toString();
    }

    static String toJson(Object v) {
        StringBuilder sb = new StringBuilder();
        json(sb, v);
        return sb.toString();
    }

    /** Minimal JSON writer; non-ASCII is escaped so the output is plain ASCII. */
    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            sb.append('"');
            for (char ch : ((String) v).toCharArray()) {
                if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
                else if (ch < 0x20 || ch > 0x7e) sb.append(String.format("\\u%04x", (int) ch));
                else sb.append(ch);
            }
            sb.append('"');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                json(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) sb.append(',');
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            json(sb, v.toString());
        }
    }
}
