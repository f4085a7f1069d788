"""Request processors of the broker, one module per concern, registered by request code."""
