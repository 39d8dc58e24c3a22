"""rocketstore.broker: the RocketMQ broker over the store (consumer offsets today)."""
