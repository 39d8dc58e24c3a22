# Host addresses and offsetMsgId text, shared with the decoders.
from libc.stdint cimport int32_t, int64_t

cdef enum:
    HOST_TEXT = 64              # '[' + 39 + ']:' + 11 fits a host's text


# 'a.b.c.d:port' or '[rfc5952]:port' of a raw 4- or 16-byte address into out (HOST_TEXT
# bytes); returns the length
cdef int format_host_into(const unsigned char* a, int alen, int32_t port, char* out) noexcept nogil
# offsetMsgId: store address + port (int32) + CommitLog offset (int64), upper-case hex
cdef str msg_id_text(const unsigned char* host, int32_t host_len, int32_t port, int64_t offset)
