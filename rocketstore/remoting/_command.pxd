# RemotingCommand as a C struct-backed object: _frames.pyx fills its fields directly.

cdef class RemotingCommand:
    cdef public int code
    cdef public int language
    cdef public int version
    cdef public int opaque
    cdef public int flag
    cdef public object remark
    cdef object _ext_fields             # None while _ext_json holds them
    cdef bytes _ext_json                # a JSON header they are decoded from when first read
    cdef public object send_header      # a SEND request's ext field values (a tuple in
                                        # rocketstore.common.send_header's order, from the frame
                                        # decoder's typed path), or None
    cdef public object body
    cdef public int serialize_type


cdef RemotingCommand new_lazy_command(int code, int language, int version, int opaque, int flag,
                                      object remark, bytes json_header, object send_header,
                                      object body)
cdef RemotingCommand new_command(int code, int language, int version, int opaque, int flag,
                                 object remark, object ext_fields, object body,
                                 int serialize_type)
