# cython: language_level=3
"""RemotingCommand: one request or response of RocketMQ's remoting protocol.

A compiled class rather than a dataclass: the decoder builds one per frame and a processor
one per reply, and a C-level constructor costs a fraction of a Python ``__init__``.
"""

cdef enum:
    # rocketstore.remoting.codes: FLAG_RESPONSE, FLAG_ONEWAY, LanguageCode.JAVA,
    # ROCKETMQ_VERSION_4_9_8 (tests/remoting/test_remoting_native.py checks they agree)
    _FLAG_RESPONSE = 1
    _FLAG_ONEWAY = 2
    _DEFAULT_LANGUAGE = 0
    _DEFAULT_VERSION = 409


cdef inline Py_ssize_t _buffer_length(object buffer) except -1:
    if type(buffer) is bytes:
        return len(<bytes>buffer)
    if type(buffer) is memoryview:
        return (<memoryview>buffer).nbytes
    return len(buffer)


#: The ext fields of a JSON header (bytes): the frame codec's decoder, set when it is imported.
cdef object _ext_fields_of_json = None


def _set_ext_fields_decoder(decoder):
    global _ext_fields_of_json
    _ext_fields_of_json = decoder


cdef class RemotingCommand:
    """A command as RocketMQ's ``RemotingCommand`` has it.

    ``code`` is a request code for requests and a response code for responses (plain ints:
    see :mod:`rocketstore.remoting.codes`). ``ext_fields`` are the request's or reply's custom
    header fields, strings on both sides (decoding turns the C++ client's JSON numbers into
    their decimal text; :mod:`rocketstore.remoting.headers` reads them typed).
    ``serialize_type`` is how the header travels; a reply made by ``create_response`` takes
    the request's. ``opaque`` matches a response to its request: the connection that sends a
    request gives it a fresh one. ``body`` is None, one buffer, or a sequence of buffers
    written back to back without being joined. The int fields are int32 (the wire's width):
    assigning a value outside it raises OverflowError.
    """

    def __init__(self, int code, int language=_DEFAULT_LANGUAGE, int version=_DEFAULT_VERSION,
                 int opaque=0, int flag=0, remark=None, ext_fields=None, body=None,
                 int serialize_type=0):
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = {} if ext_fields is None else ext_fields
        self.body = body
        self.serialize_type = serialize_type

    @property
    def ext_fields(self):
        """The custom header fields (a dict of str); a request the frame decoder read through
        its typed SEND path decodes them from its header when they are first asked for."""
        if self._ext_json is not None:
            self._ext_fields = _ext_fields_of_json(self._ext_json)
            self._ext_json = None
        return self._ext_fields

    @ext_fields.setter
    def ext_fields(self, value):
        self._ext_fields = value
        self._ext_json = None

    @property
    def is_response(self):
        return bool(self.flag & _FLAG_RESPONSE)

    @property
    def is_oneway(self):
        return bool(self.flag & _FLAG_ONEWAY)

    def mark_response(self):
        self.flag |= _FLAG_RESPONSE

    def mark_oneway(self):
        self.flag |= _FLAG_ONEWAY

    @property
    def body_length(self):
        """Bytes of the body (the sum of its buffers' when it is several)."""
        body = self.body
        if body is None:
            return 0
        if isinstance(body, (bytes, bytearray, memoryview)):
            return _buffer_length(body)
        cdef Py_ssize_t total = 0
        for part in body:
            total += _buffer_length(part)
        return total

    def body_bytes(self):
        """The body as one ``bytes`` (joined and copied when it is several buffers)."""
        body = self.body
        if body is None:
            return b""
        if type(body) is bytes:
            return body
        if isinstance(body, (bytes, bytearray, memoryview)):
            return bytes(body)
        return b"".join(body)

    def __repr__(self):
        kind = "response" if self.flag & _FLAG_RESPONSE else (
            "oneway" if self.flag & _FLAG_ONEWAY else "request")
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} "
            f"body={self.body_length} bytes serialize_type={self.serialize_type})"
        )


cdef RemotingCommand new_lazy_command(int code, int language, int version, int opaque, int flag,
                                      object remark, bytes json_header, object send_header,
                                      object body):
    """A JSON request whose ext fields are read from ``json_header`` when first asked for."""
    cdef RemotingCommand cmd = new_command(code, language, version, opaque, flag, remark, None,
                                           body, 0)
    cmd._ext_json = json_header
    cmd.send_header = send_header
    return cmd


cdef RemotingCommand new_command(int code, int language, int version, int opaque, int flag,
                                 object remark, object ext_fields, object body,
                                 int serialize_type):
    cdef RemotingCommand cmd = RemotingCommand.__new__(RemotingCommand)
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd._ext_fields = ext_fields
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


def create_request(int code, ext_fields=None, body=None, *, remark=None,
                   int serialize_type=0, bint oneway=False):
    """A request. Its ``opaque`` is set by the connection that sends it."""
    return new_command(code, _DEFAULT_LANGUAGE, _DEFAULT_VERSION, 0,
                       _FLAG_ONEWAY if oneway else 0, remark,
                       {} if ext_fields is None else ext_fields, body, serialize_type)


def create_response(RemotingCommand request not None, int code=0, remark=None, ext_fields=None,
                    body=None):
    """The reply to ``request``: its opaque and serialize type, the response flag set."""
    return new_command(code, _DEFAULT_LANGUAGE, _DEFAULT_VERSION, request.opaque, _FLAG_RESPONSE,
                       remark, {} if ext_fields is None else ext_fields, body,
                       request.serialize_type)
