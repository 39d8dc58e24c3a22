# Host addresses and offsetMsgId text, shared with the decoders.
from libc.stdint cimport int32_t, int64_t

cdef enum:
    HOST_TEXT = 64              # '[' + 39 + ']:' + 11 fits a host's text
    MSG_ID_TEXT = 56            # an offsetMsgId of an IPv6 store host: 2 * (16 + 4 + 8)


# 'a.b.c.d:port' or '[rfc5952]:port' of a raw 4- or 16-byte address into out (HOST_TEXT
# bytes); returns the length
cdef int format_host_into(const unsigned char* a, int alen, int32_t port, char* out) noexcept nogil
# offsetMsgId: store address + port (int32) + CommitLog offset (int64), upper-case hex; into
# out (MSG_ID_TEXT bytes, host_len 4 or 16), returning the length, or as a str
cdef inline int msg_id_length(int32_t host_len) noexcept nogil:
    return 2 * (host_len + 12)
cdef int msg_id_into(const unsigned char* host, int32_t host_len, int32_t port, int64_t offset,
                     char* out) noexcept nogil
cdef str msg_id_text(const unsigned char* host, int32_t host_len, int32_t port, int64_t offset)
