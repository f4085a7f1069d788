package org.rmq.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * Decodes stored message records (REMOTING.md §4.1) into column vectors: the decoding both JVM readers share,
 * the store-direct one ({@link SplitReader}: records of a CommitLog file) and the network one (records as
 * pull answers carry them, which is how the CommitLog holds them).
 *
 * <p>Every record is checked: TOTALSIZE and PHYSICALOFFSET equal to its position (the caller's), the body
 * length when a column needs the body's place; the fields past the body adding up to TOTALSIZE (and topic
 * and properties being UTF-8) when a column reads them; the body CRC (checkCRC) when the body is read.
 * Damage is an error the caller's {@link Where} words.
 */
final class RecordDecoder {
    static final int MESSAGE_MAGIC = 0xDAA320A7;
    static final int BLANK_MAGIC = 0xCBD43194;
    static final int FIXED_SIZE = 91;
    static final int POS_PHYSICAL_OFFSET = 28;
    private static final int POS_SYSFLAG = 36;
    private static final int POS_BORN_HOST = 48;
    private static final int COMPRESSED = 0x1;
    private static final int TX_MASK = 0xC;
    private static final int TX_PREPARED = 0x4;
    private static final int TX_ROLLBACK = 0xC;
    private static final int BORNHOST_V6 = 0x10;
    private static final int STOREHOST_V6 = 0x20;
    private static final int WINDOW = 1 << 20;

    /** Words an error about the record at a CommitLog offset for the reader that read it. */
    interface Where {
        IOException damage(long pos, String why);
    }

    private final Where where;
    private final boolean checkCrc;
    private final boolean decompress;
    /** The vector of each column id, null when the column is not read. */
    private final WritableColumnVector[] byId;
    private final boolean needTail;
    private final boolean needProps;
    private final boolean needBody;
    /** No column is read: only the records are counted. */
    private final boolean countOnly;
    private final CRC32 crc = new CRC32();
    private final Properties props = new Properties();
    private final HostText bornHost = new HostText();
    private final HostText storeHost = new HostText();
    private byte[] tail = new byte[4096];
    /**
     * Reads that take the properties or the body copy the mapping a window at a time into {@link #win} and
     * decode from there: one bulk copy streams at memory bandwidth, where record-by-record copies skip each
     * body and wait on memory for every tail (measured: 89 against 69 ms per GiB for the tails alone).
     */
    private final boolean windowed;
    private byte[] win = new byte[0];
    /** The mapping the window holds a copy of, the position of {@code win[0]}, and its valid bytes. */
    private Mapping winBuf;
    private int winAt;
    private int winLen;
    private byte[] body = new byte[4096];
    private final byte[] msgId = new byte[56];
    /** The record being decoded: its mapping, the mapping's valid bytes, its CommitLog offset. */
    private Mapping buf;
    private int bufLen;
    private long pos;

    /** Decodes into {@code vectors}, which hold the columns {@code ids} (none: count only). */
    RecordDecoder(Where where, boolean checkCrc, boolean decompress, int[] ids, WritableColumnVector[] vectors) {
        this.where = where;
        this.checkCrc = checkCrc;
        this.decompress = decompress;
        this.byId = new WritableColumnVector[Columns.NAMES.length];
        boolean tailCols = false;
        boolean propCols = false;
        for (int i = 0; i < ids.length; i++) {
            byId[ids[i]] = vectors[i];
            switch (ids[i]) {
                case Columns.TOPIC, Columns.IS_SYSTEM_TOPIC -> tailCols = true;
                case Columns.TAGS, Columns.KEYS, Columns.UNIQ_KEY, Columns.MSG_ID, Columns.PROPERTIES,
                        Columns.IS_TRANSACTION_PREPARED, Columns.VISIBLE -> {
                    tailCols = true;
                    propCols = true;
                }
                default -> { }
            }
        }
        needTail = tailCols;
        needProps = propCols;
        needBody = byId[Columns.BODY] != null;
        countOnly = ids.length == 0;
        windowed = needBody || needProps;
    }

    /**
     * Check the record at {@code p} of {@code buf} (the first {@code bufLen} bytes of it valid), stored at
     * CommitLog offset {@code pos}, and append its row; returns the bytes of variable-width data appended.
     */
    long append(Mapping buf, int bufLen, int p, int total, long pos) throws IOException {
        this.buf = buf;
        this.bufLen = bufLen;
        this.pos = pos;
        if (total < FIXED_SIZE || (long) p + total > bufLen) {
            throw where.damage(pos, "TOTALSIZE " + total + " is outside [" + FIXED_SIZE + ", " + (bufLen - p) + "]");
        }
        if (buf.getLong(p + POS_PHYSICAL_OFFSET) != pos) {
            throw where.damage(pos, "the record's PHYSICALOFFSET is " + buf.getLong(p + POS_PHYSICAL_OFFSET) + ", not its position");
        }
        int sysflag = buf.getInt(p + POS_SYSFLAG);
        int bornLen = (sysflag & BORNHOST_V6) != 0 ? 16 : 4;
        int storeLen = (sysflag & STOREHOST_V6) != 0 ? 16 : 4;
        int storeTsAt = POS_BORN_HOST + bornLen + 4;
        int storeHostAt = storeTsAt + 8;
        int reconsumeAt = storeHostAt + storeLen + 4;
        int bodyLenAt = reconsumeAt + 12;
        int fixed = bodyLenAt + 4 + 1 + 2; // with an empty body, topic and properties
        if (fixed > total) {
            throw where.damage(pos, "TOTALSIZE " + total + " is shorter than the record's fixed fields (" + fixed + ")");
        }
        if (countOnly) {
            return 0; // no column: the record chain is all a count needs
        }
        int bodyLen = buf.getInt(p + bodyLenAt);
        if (bodyLen < 0 || (long) fixed + bodyLen > total) {
            throw where.damage(pos, "body length " + bodyLen + " does not fit in TOTALSIZE " + total);
        }
        int bodyAt = bodyLenAt + 4;
        int topicAt = bodyAt + bodyLen;
        int topicLen = 0;
        int propsLen = 0;
        // Where the topic (then the properties) and the body are read from: the window, or copies.
        byte[] tailArr = tail;
        int tailOff = 0;
        byte[] bodyArr = body;
        int bodyOff = 0;
        if (windowed) {
            int at = window(p, total);
            tailArr = win;
            tailOff = at + topicAt;
            bodyArr = win;
            bodyOff = at + bodyAt;
        }
        if (needTail) {
            // The fields past the body: their lengths must add up to TOTALSIZE.
            topicLen = buf.get(p + topicAt) & 0xff;
            int propsLenAt = topicAt + 1 + topicLen;
            if (propsLenAt + 2 > total) {
                throw where.damage(pos, "topic length " + topicLen + " does not fit in TOTALSIZE " + total);
            }
            propsLen = buf.getShort(p + propsLenAt);
            if (propsLen < 0 || propsLenAt + 2 + propsLen != total) {
                throw where.damage(pos, "the fields add up to " + (propsLenAt + 2 + Math.max(propsLen, 0))
                        + " bytes but TOTALSIZE is " + total);
            }
            if (!windowed) {
                // The topic, and the properties when a column needs them.
                int tailLen = needProps ? total - topicAt : 1 + topicLen;
                if (tail.length < tailLen) {
                    tail = new byte[Math.max(tailLen, tail.length * 2)];
                }
                buf.copy(p + topicAt, tail, 0, tailLen);
                tailArr = tail;
            }
            if (!Properties.isAscii(tailArr, tailOff + 1, topicLen)) {
                checkUtf8(tailArr, tailOff + 1, topicLen, "topic");
            }
            if (needProps && !props.parse(tailArr, tailOff + topicLen + 3, propsLen)) {
                checkUtf8(tailArr, tailOff + topicLen + 3, propsLen, "properties");
            }
        }
        if (needBody) {
            if (!windowed) {
                if (body.length < bodyLen) {
                    body = new byte[Math.max(bodyLen, body.length * 2)];
                }
                buf.copy(p + bodyAt, body, 0, bodyLen);
                bodyArr = body;
            }
            if (checkCrc) {
                crc.reset();
                crc.update(bodyArr, bodyOff, bodyLen);
                if ((int) (crc.getValue() & 0x7fffffff) != buf.getInt(p + 8)) {
                    throw where.damage(pos, "body CRC mismatch");
                }
            }
        }
        int topicOff = tailOff + 1;
        long bytes = 0;
        WritableColumnVector v;
        if ((v = byId[Columns.TOPIC]) != null) {
            v.appendByteArray(tailArr, topicOff, topicLen);
            bytes += topicLen;
        }
        if ((v = byId[Columns.QUEUE_ID]) != null) {
            v.appendInt(buf.getInt(p + 12));
        }
        if ((v = byId[Columns.QUEUE_OFFSET]) != null) {
            v.appendLong(buf.getLong(p + 20));
        }
        if ((v = byId[Columns.COMMITLOG_OFFSET]) != null) {
            v.appendLong(pos);
        }
        if ((v = byId[Columns.STORE_SIZE]) != null) {
            v.appendInt(total);
        }
        if ((v = byId[Columns.SYSFLAG]) != null) {
            v.appendInt(sysflag);
        }
        if ((v = byId[Columns.FLAG]) != null) {
            v.appendInt(buf.getInt(p + 16));
        }
        if ((v = byId[Columns.BORN_TIMESTAMP]) != null) {
            v.appendLong(micros(buf.getLong(p + 40)));
        }
        if ((v = byId[Columns.STORE_TIMESTAMP]) != null) {
            v.appendLong(micros(buf.getLong(p + storeTsAt)));
        }
        if ((v = byId[Columns.BORN_HOST]) != null) {
            bytes += bornHost.append(v, buf, p + POS_BORN_HOST, bornLen == 16);
        }
        if ((v = byId[Columns.STORE_HOST]) != null) {
            bytes += storeHost.append(v, buf, p + storeHostAt, storeLen == 16);
        }
        if ((v = byId[Columns.RECONSUME_TIMES]) != null) {
            v.appendInt(buf.getInt(p + reconsumeAt));
        }
        if ((v = byId[Columns.PREPARED_TRANSACTION_OFFSET]) != null) {
            v.appendLong(buf.getLong(p + reconsumeAt + 4));
        }
        if ((v = byId[Columns.TAGS]) != null) {
            bytes += appendOpt(v, props.tags);
        }
        if ((v = byId[Columns.KEYS]) != null) {
            bytes += appendOpt(v, props.keys);
        }
        if ((v = byId[Columns.UNIQ_KEY]) != null) {
            bytes += appendOpt(v, props.uniqKey);
        }
        if ((v = byId[Columns.MSG_ID]) != null) {
            if (props.uniqKey >= 0) {
                bytes += appendOpt(v, props.uniqKey);
            } else {
                bytes += appendMsgId(v, p + storeHostAt, storeLen == 16);
            }
        }
        if ((v = byId[Columns.OFFSET_MSG_ID]) != null) {
            bytes += appendMsgId(v, p + storeHostAt, storeLen == 16);
        }
        if ((v = byId[Columns.PROPERTIES]) != null) {
            bytes += props.appendMap(v);
        }
        if ((v = byId[Columns.BODY]) != null) {
            if ((sysflag & COMPRESSED) != 0 && decompress) {
                byte[] inflated = inflate(bodyArr, bodyOff, bodyLen, sysflag);
                v.appendByteArray(inflated, 0, inflated.length);
                bytes += inflated.length;
            } else {
                v.appendByteArray(bodyArr, bodyOff, bodyLen);
                bytes += bodyLen;
            }
        }
        if ((v = byId[Columns.BODY_SIZE]) != null) {
            v.appendInt(bodyLen);
        }
        boolean system = false;
        boolean prepared = false;
        if (byId[Columns.IS_SYSTEM_TOPIC] != null || byId[Columns.VISIBLE] != null) {
            system = Topics.isSystem(tailArr, topicOff, topicLen);
        }
        if (byId[Columns.IS_TRANSACTION_PREPARED] != null || byId[Columns.VISIBLE] != null) {
            prepared = (sysflag & TX_MASK) == TX_PREPARED
                    || (Topics.isHalf(tailArr, topicOff, topicLen) && props.tranMsgIsTrue());
        }
        if ((v = byId[Columns.IS_TRANSACTION_PREPARED]) != null) {
            v.appendBoolean(prepared);
        }
        if ((v = byId[Columns.IS_SYSTEM_TOPIC]) != null) {
            v.appendBoolean(system);
        }
        if ((v = byId[Columns.VISIBLE]) != null) {
            v.appendBoolean(!system && !prepared && (sysflag & TX_MASK) != TX_ROLLBACK);
        }
        return bytes;
    }

    /** Make the window hold the record at mapping position {@code p}; returns where it starts in the window. */
    private int window(int p, int total) {
        if (buf != winBuf || p < winAt || p + total > winAt + winLen) {
            winBuf = buf;
            int len = Math.min(Math.max(WINDOW, total), bufLen - p);
            if (win.length < len) {
                win = new byte[len];
            }
            buf.copy(p, win, 0, len);
            winAt = p;
            winLen = len;
        }
        return p - winAt;
    }

    private long appendOpt(WritableColumnVector v, int entry) {
        if (entry < 0) {
            v.appendNull();
            return 0;
        }
        int len = props.valueLen(entry);
        v.appendByteArray(props.bytes(), props.valueStart(entry), len);
        return len;
    }

    private static final byte[] HEX = "0123456789ABCDEF".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /** The offset message id: uppercase hex of the store host's ip, its port (4 bytes) and the record's offset. */
    private int appendMsgId(WritableColumnVector v, int hostAt, boolean v6) {
        int ipLen = v6 ? 16 : 4;
        int n = 0;
        for (int i = 0; i < ipLen; i++) {
            int b = buf.get(hostAt + i) & 0xff;
            msgId[n++] = HEX[b >>> 4];
            msgId[n++] = HEX[b & 15];
        }
        int port = buf.getInt(hostAt + ipLen) & 0xffff;
        for (int shift = 28; shift >= 0; shift -= 4) {
            msgId[n++] = HEX[(port >>> shift) & 15];
        }
        for (int shift = 60; shift >= 0; shift -= 4) {
            msgId[n++] = HEX[(int) ((pos >>> shift) & 15)];
        }
        v.appendByteArray(msgId, 0, n);
        return n;
    }

    private static long micros(long ms) {
        long us = ms * 1000;
        if (Math.abs(ms) > Long.MAX_VALUE / 1000) {
            return ms > 0 ? Long.MAX_VALUE : Long.MIN_VALUE;
        }
        return us;
    }

    private void checkUtf8(byte[] b, int off, int len, String what) throws IOException {
        try {
            java.nio.charset.StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(b, off, len));
        } catch (java.nio.charset.CharacterCodingException e) {
            throw where.damage(pos, what + " are not UTF-8");
        }
    }

    /** Inflate a body stored compressed: the type bits (4.9.4+) choose zlib (0, 3), LZ4 (1) or ZSTD (2). */
    private byte[] inflate(byte[] data, int off, int len, int sysflag) throws IOException {
        int type = (sysflag >>> 8) & 0x7;
        try {
            switch (type) {
                case 0, 3 -> {
                    Inflater inf = new Inflater();
                    try {
                        inf.setInput(data, off, len);
                        ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(64, len * 4));
                        byte[] chunk = new byte[Math.max(1024, len * 4)];
                        while (!inf.finished()) {
                            int n = inf.inflate(chunk);
                            if (n == 0 && (inf.needsInput() || inf.needsDictionary())) {
                                throw new DataFormatException("truncated zlib stream");
                            }
                            out.write(chunk, 0, n);
                        }
                        return out.toByteArray();
                    } finally {
                        inf.end();
                    }
                }
                case 1 -> {
                    return readAll(new net.jpountz.lz4.LZ4FrameInputStream(new ByteArrayInputStream(data, off, len)));
                }
                case 2 -> {
                    return readAll(new com.github.luben.zstd.ZstdInputStream(new ByteArrayInputStream(data, off, len)));
                }
                default -> {
                    byte[] same = new byte[len];
                    System.arraycopy(data, off, same, 0, len);
                    return same;
                }
            }
        } catch (DataFormatException | IOException e) {
            IOException damage = where.damage(pos, "the body is stored compressed (sysflag "
                    + String.format("0x%x", sysflag) + ") and does not inflate: " + e.getMessage()
                    + " (option decompress=false reads it as stored)");
            damage.initCause(e);
            throw damage;
        }
    }

    private static byte[] readAll(InputStream in) throws IOException {
        try (in) {
            return in.readAllBytes();
        }
    }
}
