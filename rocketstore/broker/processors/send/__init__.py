"""The send family: SEND_MESSAGE 10, SEND_MESSAGE_V2 310 and SEND_BATCH_MESSAGE 320.

``processor.py`` registers the family and holds what its rules ask of the broker;
``_send_path.pyx`` is the rules, written once, with their common case in one native call;
``_send_header.pyx`` reads a SEND header and its properties text; ``batch.py`` is a batch's
own rules and put.
"""

from rocketstore.broker.processors.send.processor import SendMessageProcessor, put_response

__all__ = ["SendMessageProcessor", "put_response"]
