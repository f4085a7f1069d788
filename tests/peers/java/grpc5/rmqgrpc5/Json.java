package rmqgrpc5;

import java.util.List;
import java.util.Map;

/** The JSON the drivers print (strings, string maps and lists), written by hand: no JSON library is on the
 * clients' class path. */
final class Json {
    private Json() {
    }

    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }

    /** A JSON object of strings; values that are JSON already (start with '{') are written as they are. */
    static String map(Map<String, String> m) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, String> e : m.entrySet()) {
            if (b.length() > 1) {
                b.append(',');
            }
            String v = e.getValue();
            b.append(quote(e.getKey())).append(':').append(v != null && v.startsWith("{") ? v : quote(v));
        }
        return b.append('}').toString();
    }

    /** A JSON array of strings (a synchronized list is read under its lock). */
    static String list(List<String> items) {
        StringBuilder b = new StringBuilder("[");
        synchronized (items) {
            for (String s : items) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(quote(s));
            }
        }
        return b.append(']').toString();
    }
}
