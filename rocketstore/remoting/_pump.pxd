# A request handler that may write its reply straight into the connection's frame writer.

from rocketstore.remoting._command cimport RemotingCommand
from rocketstore.remoting._frames cimport FrameWriter


cdef class DirectHandler:
    cdef object call_into(self, object connection, RemotingCommand request, FrameWriter writer)
