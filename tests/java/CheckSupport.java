import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;

/** What the Java check programs (ClientCheck, TxnCheck) share: their JSON-lines report. */
final class CheckSupport {
    private CheckSupport() {}

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
