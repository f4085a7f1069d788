// The Java side of the differential test (run.sh): evaluates with RocketMQ's own filter.
// Same line protocol as rust/filter/examples/oracle.rs.
import java.io.*;
import java.util.*;
import org.apache.rocketmq.filter.expression.*;
import org.apache.rocketmq.filter.parser.SelectorParser;
import org.apache.rocketmq.filter.util.BloomFilter;

public class Oracle {
    static String esc(String s) { return s.replace("\\n", "\n").replace("\\t", "\t"); }
    public static void main(String[] a) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = r.readLine()) != null) {
            String[] p = line.split("\t", -1);
            if (p[0].equals("B")) {
                BloomFilter bf = BloomFilter.createByFn(Integer.parseInt(p[2]), Integer.parseInt(p[3]));
                out.println(bf.getM() + " " + bf.getK() + " " + Arrays.toString(bf.calcBitPositions(p[1])));
                continue;
            }
            String expr = esc(p[1]);
            Map<String, String> props = new HashMap<>();
            if (p.length > 2 && !p[2].isEmpty()) {
                for (String kv : p[2].split(";", -1)) {
                    int i = kv.indexOf('=');
                    props.put(kv.substring(0, i), kv.substring(i + 1));
                }
            }
            Expression e;
            try {
                e = SelectorParser.parse(expr);
            } catch (Throwable t) {
                out.println("PARSE_ERROR");
                continue;
            }
            final Map<String, String> fp = props;
            EvaluationContext ctx = new EvaluationContext() {
                public Object get(String name) { return fp.get(name); }
                public Map<String, Object> keyValues() { return null; }
            };
            try {
                Object v = e.evaluate(ctx);
                out.println(v == null ? "NULL" : v.toString().toUpperCase());
            } catch (Throwable t) {
                out.println("EVAL_ERROR");
            }
        }
    }
}
