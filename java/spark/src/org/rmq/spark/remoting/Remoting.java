package org.rmq.spark.remoting;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A small blocking Remoting client (REMOTING.md §1) the JVM sink and the JVM network reader share: requests
 * framed as {@code length, header length + serialize type, JSON header, body}; answers read in the order
 * they come, matched by opaque by the caller.
 */
public final class Remoting {
    public static final int PULL_MESSAGE = 11;
    public static final int UPDATE_CONSUMER_OFFSET = 15;
    public static final int GET_MAX_OFFSET = 30;
    public static final int GET_MIN_OFFSET = 31;
    public static final int GET_ROUTEINFO_BY_TOPIC = 105;
    public static final int SEND_BATCH_MESSAGE = 320;
    /** The Java client's version code the requests carry (4.9.8's). */
    private static final int VERSION = 453;
    private static final ObjectMapper JSON = new ObjectMapper();

    private Remoting() {}

    /** A response: its code, opaque, remark, header fields and body. */
    public record Response(int code, int opaque, String remark, Map<String, String> ext, byte[] body) {
        /** Header field {@code name} as a long, {@code dflt} when it is missing or not a number. */
        public long extLong(String name, long dflt) {
            String v = ext.get(name);
            if (v == null) {
                return dflt;
            }
            try {
                return Long.parseLong(v.strip());
            } catch (NumberFormatException e) {
                return dflt;
            }
        }
    }

    public static byte[] header(int code, int opaque, Map<String, String> ext) {
        ObjectNode h = JSON.createObjectNode();
        h.put("code", code);
        h.put("language", "JAVA");
        h.put("version", VERSION);
        h.put("opaque", opaque);
        h.put("flag", 0);
        ObjectNode fields = h.putObject("extFields");
        for (Map.Entry<String, String> e : ext.entrySet()) {
            fields.put(e.getKey(), e.getValue());
        }
        h.put("serializeTypeCurrentRPC", "JSON");
        try {
            return JSON.writeValueAsBytes(h);
        } catch (IOException e) {
            throw new IllegalStateException("cannot encode a Remoting header", e);
        }
    }

    /** One TCP connection to a name server or broker. */
    public static final class Connection implements AutoCloseable {
        public final String addr;
        private final Socket socket;
        private final OutputStream out;
        private final DataInputStream in;

        /** A plaintext connection, or TLS when {@code tls} is not null. */
        public Connection(String addr, int timeoutMs, Tls tls) throws IOException {
            this.addr = addr;
            int colon = addr.lastIndexOf(':');
            if (colon <= 0) {
                throw new IOException("address '" + addr + "' is not host:port");
            }
            int port;
            try {
                port = Integer.parseInt(addr.substring(colon + 1));
            } catch (NumberFormatException e) {
                throw new IOException("address '" + addr + "' is not host:port", e);
            }
            Socket s = new Socket();
            try {
                s.setTcpNoDelay(true);
                s.connect(new InetSocketAddress(addr.substring(0, colon), port), timeoutMs);
                s.setSoTimeout(timeoutMs);
                if (tls != null) {
                    s = tls.wrap(s, addr.substring(0, colon), port);
                }
                this.out = new BufferedOutputStream(s.getOutputStream(), 1 << 16);
                this.in = new DataInputStream(new BufferedInputStream(s.getInputStream(), 1 << 16));
            } catch (IOException e) {
                s.close();
                throw e;
            }
            this.socket = s;
        }

        public void send(byte[] header, byte[] body, int bodyLength) throws IOException {
            int total = 4 + header.length + bodyLength;
            byte[] prefix = new byte[8];
            putInt(prefix, 0, total);
            putInt(prefix, 4, header.length); // serialize type JSON (0) in the high byte
            out.write(prefix);
            out.write(header);
            if (bodyLength > 0) {
                out.write(body, 0, bodyLength);
            }
            out.flush();
        }

        /** The next answer on this connection (a socket timeout or a closed connection throws). */
        public Response read() throws IOException {
            int total = in.readInt();
            int mark = in.readInt();
            int headerLength = mark & 0xFFFFFF;
            int type = (mark >>> 24) & 0xFF;
            if (total < 4 + headerLength || headerLength < 0) {
                throw new IOException("malformed Remoting frame from " + addr + " (" + total + " bytes)");
            }
            byte[] header = new byte[headerLength];
            in.readFully(header);
            byte[] body = new byte[total - 4 - headerLength];
            in.readFully(body);
            if (type == 0) {
                JsonNode h = JSON.readTree(header);
                JsonNode remark = h.get("remark");
                Map<String, String> ext = new HashMap<>();
                for (Map.Entry<String, JsonNode> e : h.path("extFields").properties()) {
                    ext.put(e.getKey(), e.getValue().asText());
                }
                return new Response(
                        h.path("code").asInt(-1),
                        h.path("opaque").asInt(-1),
                        remark == null || remark.isNull() ? "" : remark.asText(),
                        ext,
                        body);
            }
            // RocketMQ's binary header: code, language, version, opaque, flag, remark, ext fields.
            java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(header);
            int code = b.getShort();
            b.get();
            b.getShort();
            int opaque = b.getInt();
            b.getInt();
            String remark = text(b, b.getInt());
            Map<String, String> ext = new HashMap<>();
            int extLength = b.getInt();
            int extEnd = b.position() + Math.max(0, extLength);
            while (b.position() < extEnd) {
                String k = text(b, b.getShort());
                ext.put(k, text(b, b.getInt()));
            }
            return new Response(code, opaque, remark, ext, body);
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing: nothing to do about it
            }
        }
    }

    private static String text(java.nio.ByteBuffer b, int length) {
        if (length <= 0) {
            return "";
        }
        byte[] r = new byte[length];
        b.get(r);
        return new String(r, StandardCharsets.UTF_8);
    }

    /** Big-endian {@code v} into {@code b} at {@code at}. */
    public static void putInt(byte[] b, int at, int v) {
        b[at] = (byte) (v >>> 24);
        b[at + 1] = (byte) (v >>> 16);
        b[at + 2] = (byte) (v >>> 8);
        b[at + 3] = (byte) v;
    }
}
