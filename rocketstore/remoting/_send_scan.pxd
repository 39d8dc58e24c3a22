# The SEND header decoders, for the frame decoder (_frames.pyx).
from rocketstore.remoting._command cimport RemotingCommand

cdef RemotingCommand scan_send_json(bytes header)
cdef RemotingCommand decode_send_json(bytes header, bint scan)
