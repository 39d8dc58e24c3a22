"""Type stub of rocketstore/_native/batch_put.pyx: a SEND_BATCH_MESSAGE body put without a
Python object per message."""

from typing import final

from rocketstore._native.record_writer import PutMessagesResult, RecordWriter

@final
class EncodedBatch:
    """A batch body read for a put (its bytes and the outer pairs held)."""

    @property
    def count(self) -> int: ...
    @property
    def waits(self) -> bool:
        """A message whose WAIT (after the request's own) is not "false"."""

def read_batch_body(body: bytes, outer: dict[str, str], born_host: str, born_timestamp: int,
                    sys_flag: int, reconsume_times: int) -> EncodedBatch | None:
    """The batch ready for prepare_encoded_batch, or None: the Message path decides."""

def prepare_encoded_batch(writer: RecordWriter, batch: EncodedBatch, topic: str,
                          queue_id: int) -> PutMessagesResult:
    """RecordWriter.prepare_batch for an EncodedBatch (under the put lock)."""

def batch_msg_ids(result: PutMessagesResult) -> str:
    """The stored messages' offsetMsgIds, comma-separated."""
