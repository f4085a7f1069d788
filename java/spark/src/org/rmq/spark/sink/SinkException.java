package org.rmq.spark.sink;

/** A write the sink cannot do: a bad row, an unknown topic, a refusal, sends that kept failing. */
public final class SinkException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    SinkException(String message) {
        super(message);
    }

    SinkException(String message, Throwable cause) {
        super(message, cause);
    }
}
