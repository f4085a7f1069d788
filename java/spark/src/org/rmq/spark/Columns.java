package org.rmq.spark;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** The row schema: the same columns, types and nullability as rmq's Python source ({@code rmq.spark.spark_schema()}). */
final class Columns {
    private Columns() {}

    static final int TOPIC = 0;
    static final int QUEUE_ID = 1;
    static final int QUEUE_OFFSET = 2;
    static final int COMMITLOG_OFFSET = 3;
    static final int STORE_SIZE = 4;
    static final int SYSFLAG = 5;
    static final int FLAG = 6;
    static final int BORN_TIMESTAMP = 7;
    static final int STORE_TIMESTAMP = 8;
    static final int BORN_HOST = 9;
    static final int STORE_HOST = 10;
    static final int RECONSUME_TIMES = 11;
    static final int PREPARED_TRANSACTION_OFFSET = 12;
    static final int TAGS = 13;
    static final int KEYS = 14;
    static final int UNIQ_KEY = 15;
    static final int MSG_ID = 16;
    static final int OFFSET_MSG_ID = 17;
    static final int PROPERTIES = 18;
    static final int BODY = 19;
    static final int BODY_SIZE = 20;
    static final int IS_TRANSACTION_PREPARED = 21;
    static final int IS_SYSTEM_TOPIC = 22;
    static final int VISIBLE = 23;

    static final String[] NAMES = {
        "topic", "queue_id", "queue_offset", "commitlog_offset", "store_size", "sysflag", "flag",
        "born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times",
        "prepared_transaction_offset", "tags", "keys", "uniq_key", "msg_id", "offset_msg_id",
        "properties", "body", "body_size", "is_transaction_prepared", "is_system_topic", "visible",
    };

    private static final DataType STR = DataTypes.StringType;
    private static final DataType INT = DataTypes.IntegerType;
    private static final DataType LONG = DataTypes.LongType;
    private static final DataType TS = DataTypes.TimestampType;
    private static final DataType BOOL = DataTypes.BooleanType;

    private static final DataType[] TYPES = {
        STR, INT, LONG, LONG, INT, INT, INT, TS, TS, STR, STR, INT, LONG, STR, STR, STR, STR, STR,
        DataTypes.createMapType(STR, STR, true), DataTypes.BinaryType, INT, BOOL, BOOL, BOOL,
    };

    private static final boolean[] NULLABLE = new boolean[NAMES.length];

    static {
        NULLABLE[TAGS] = true;
        NULLABLE[KEYS] = true;
        NULLABLE[UNIQ_KEY] = true;
        NULLABLE[BODY] = true;
    }

    static final StructType SCHEMA = schema();

    private static StructType schema() {
        StructField[] fields = new StructField[NAMES.length];
        for (int i = 0; i < NAMES.length; i++) {
            fields[i] = DataTypes.createStructField(NAMES[i], TYPES[i], NULLABLE[i]);
        }
        return DataTypes.createStructType(fields);
    }

    /** The column id of each field of {@code schema}, which must be a subset of the row schema. */
    static int[] ids(StructType schema) {
        StructField[] fields = schema.fields();
        int[] ids = new int[fields.length];
        for (int i = 0; i < fields.length; i++) {
            ids[i] = id(fields[i].name());
            if (!TYPES[ids[i]].sameType(fields[i].dataType())) {
                throw new IllegalArgumentException("column " + NAMES[ids[i]] + " is " + TYPES[ids[i]].simpleString()
                        + ", not " + fields[i].dataType().simpleString());
            }
        }
        return ids;
    }

    static int id(String name) {
        for (int i = 0; i < NAMES.length; i++) {
            if (NAMES[i].equals(name)) {
                return i;
            }
        }
        throw new IllegalArgumentException("rocketmq has no column '" + name + "'; columns: " + String.join(", ", NAMES));
    }
}
