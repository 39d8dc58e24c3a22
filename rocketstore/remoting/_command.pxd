# RemotingCommand as a C struct-backed object: _frames.pyx fills its fields directly.

cdef class RemotingCommand:
    cdef public int code
    cdef public int language
    cdef public int version
    cdef public int opaque
    cdef public int flag
    cdef public object remark
    cdef public object ext_fields
    cdef public object body
    cdef public int serialize_type


cdef RemotingCommand new_command(int code, int language, int version, int opaque, int flag,
                                 object remark, object ext_fields, object body,
                                 int serialize_type)
