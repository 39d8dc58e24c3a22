from rocketstore.client.message import MessageExt

def decode_messages(
    body: bytes | bytearray | memoryview | None, decompress: bool = True, broker_name: str | None = None
) -> list[MessageExt]:
    """Every record of a pull, query or view reply body, in order; CorruptMessageError when a
    length does not fit."""
