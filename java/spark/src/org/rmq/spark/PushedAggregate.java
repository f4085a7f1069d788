package org.rmq.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * An aggregate Spark pushed down to the reader ({@code SupportsPushDownAggregates}): each split is read into its
 * partial result (one row per group) and Spark merges the partials. Taken: {@code COUNT(*)}, {@code COUNT(col)}
 * of a column that is never null, and {@code SUM} of an int column, grouped by nothing, {@code topic},
 * {@code queue_id} or both. Anything else is left to Spark over the rows.
 */
final class PushedAggregate implements Serializable {
    private static final long serialVersionUID = 1L;

    /** The group-by columns (ids). */
    final int[] groupBy;
    /** Per aggregate: the summed column's id, or -1 for a count. */
    final int[] sumOf;

    private PushedAggregate(int[] groupBy, int[] sumOf) {
        this.groupBy = groupBy;
        this.sumOf = sumOf;
    }

    /** The aggregate as this reader computes it, or null when it does not take it. */
    static PushedAggregate of(Aggregation aggregation) {
        Expression[] groups = aggregation.groupByExpressions();
        int[] groupBy = new int[groups.length];
        for (int i = 0; i < groups.length; i++) {
            int id = column(groups[i]);
            if (id != Columns.TOPIC && id != Columns.QUEUE_ID) {
                return null;
            }
            for (int j = 0; j < i; j++) {
                if (groupBy[j] == id) {
                    return null;
                }
            }
            groupBy[i] = id;
        }
        AggregateFunc[] funcs = aggregation.aggregateExpressions();
        int[] sumOf = new int[funcs.length];
        for (int i = 0; i < funcs.length; i++) {
            AggregateFunc f = funcs[i];
            if (f instanceof CountStar) {
                sumOf[i] = -1;
            } else if (f instanceof Count c && !c.isDistinct() && column(c.column()) >= 0
                    && !Columns.SCHEMA.fields()[column(c.column())].nullable()) {
                sumOf[i] = -1;
            } else if (f instanceof Sum s && !s.isDistinct() && column(s.column()) >= 0
                    && Columns.SCHEMA.fields()[column(s.column())].dataType() == DataTypes.IntegerType) {
                sumOf[i] = column(s.column());
            } else {
                return null;
            }
        }
        return new PushedAggregate(groupBy, sumOf);
    }

    private static int column(Expression e) {
        if (!(e instanceof NamedReference ref) || ref.fieldNames().length != 1) {
            return -1;
        }
        for (int i = 0; i < Columns.NAMES.length; i++) {
            if (Columns.NAMES[i].equals(ref.fieldNames()[0])) {
                return i;
            }
        }
        return -1;
    }

    /** The schema of the partial results: the group-by columns, then a bigint per aggregate. */
    StructType resultSchema() {
        List<StructField> fields = new ArrayList<>();
        for (int id : groupBy) {
            fields.add(Columns.SCHEMA.fields()[id]);
        }
        for (int i = 0; i < sumOf.length; i++) {
            String name = sumOf[i] < 0 ? "count_" + i : "sum_" + Columns.NAMES[sumOf[i]] + "_" + i;
            fields.add(DataTypes.createStructField(name, DataTypes.LongType, false));
        }
        return DataTypes.createStructType(fields);
    }

    /** The columns the rows must carry: the group-by columns, then each summed column once. */
    StructType inputSchema() {
        List<StructField> fields = new ArrayList<>();
        List<Integer> ids = new ArrayList<>();
        for (int id : groupBy) {
            fields.add(Columns.SCHEMA.fields()[id]);
            ids.add(id);
        }
        for (int id : sumOf) {
            if (id >= 0 && !ids.contains(id)) {
                fields.add(Columns.SCHEMA.fields()[id]);
                ids.add(id);
            }
        }
        return DataTypes.createStructType(fields);
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < sumOf.length; i++) {
            s.append(i == 0 ? "" : ", ").append(sumOf[i] < 0 ? "count(*)" : "sum(" + Columns.NAMES[sumOf[i]] + ")");
        }
        if (groupBy.length > 0) {
            s.append(" group by ");
            for (int i = 0; i < groupBy.length; i++) {
                s.append(i == 0 ? "" : ", ").append(Columns.NAMES[groupBy[i]]);
            }
        }
        return s.toString();
    }
}
