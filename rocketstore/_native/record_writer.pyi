"""Type stub of rocketstore/_native/record_writer.pyx: messages encoded into CommitLog files."""

from typing import final

from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.message import Message
from rocketstore._native.put_results import PutMessageResult, PutMessagesResult
from rocketstore._native.topic_queue_table import TopicQueueTable

@final
class RecordWriter:
    """Encodes messages into CommitLog MappedFiles (under the caller's put lock) and owns
    the topic queue table. Never rolls files: it writes the END_FILE blank and says so."""

    @property
    def queue_table(self) -> TopicQueueTable: ...
    @property
    def file_size(self) -> int: ...
    @property
    def max_message_size(self) -> int: ...
    @property
    def store_host(self) -> str: ...
    def __init__(
        self,
        file_size: int,
        max_message_size: int,
        store_host: str,
        queue_table: TopicQueueTable | None = None,
    ) -> None: ...
    def append(
        self, mf: MappedFile, message: Message, queue_id: int
    ) -> PutMessageResult | None:
        """Encode message at mf's write position; None when it did not fit (blank written)."""

    def prepare_batch(
        self, messages: list[Message], queue_ids: int | list[int] | tuple[int, ...]
    ) -> PutMessagesResult:
        """Validate a whole batch; nothing is written."""

    def write_batch(self, mf: MappedFile, res: PutMessagesResult) -> bool:
        """Write the prepared batch from res.stored on; False when mf filled up."""

    def write_blank(self, mf: MappedFile) -> None:
        """Close mf with an END_FILE blank at its write position."""
