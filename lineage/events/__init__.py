"""OpenLineage events as Kafka messages: validation rules (data), the Python validator, the Kafka key."""
