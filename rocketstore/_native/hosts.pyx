# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Hosts ('ip:port' text <-> raw address and port) and offsetMsgId (the store's message id)."""
import ipaddress

from cpython.bytes cimport PyBytes_AS_STRING
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy

from rocketstore._native.includes.byteorder cimport rs_put_u32, rs_put_u64
from rocketstore._native.includes.hex cimport rs_hex_lower_digits, rs_hex_upper
from rocketstore._native.includes.python cimport PyUnicode_DATA, PyUnicode_New


cdef dict _host_cache = {}


def parse_host(host):
    """'a.b.c.d:port' or '[v6]:port' (or an (address, port) tuple) -> (raw address bytes, port).

    Raises ValueError naming the text when it is not an IP literal with a port."""
    cached = _host_cache.get(host)
    if cached is not None:
        return cached
    if isinstance(host, tuple) and len(host) == 2:
        addr_text, port = str(host[0]), host[1]
    elif isinstance(host, str):
        text = host.strip()
        if text.startswith("["):
            end = text.find("]")
            if end < 0 or text[end + 1:end + 2] != ":":
                raise ValueError(f"host {host!r} is not '[ipv6]:port'")
            addr_text, port_text = text[1:end], text[end + 2:]
        else:
            addr_text, sep, port_text = text.rpartition(":")
            if not sep:
                raise ValueError(f"host {host!r} has no ':port'")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"host {host!r} has a bad port") from None
    else:
        raise TypeError(f"host must be 'ip:port' text or an (ip, port) tuple, got {type(host).__name__}")
    if not isinstance(port, int) or not 0 <= port <= 0x7FFFFFFF:
        raise ValueError(f"host {host!r} has a bad port")
    try:
        raw = ipaddress.ip_address(addr_text).packed
    except ValueError:
        raise ValueError(f"host {host!r} is not an IP address literal") from None
    result = (raw, port)
    if len(_host_cache) < 4096:
        _host_cache[host] = result
    return result


cdef inline int _put_uint(char* out, uint32_t v) noexcept nogil:
    cdef char tmp[12]
    cdef int n = 0, i
    while True:
        tmp[n] = <char>(48 + v % 10)
        n += 1
        v //= 10
        if v == 0:
            break
    for i in range(n):
        out[i] = tmp[n - 1 - i]
    return n


cdef inline int _put_int(char* out, int32_t v) noexcept nogil:
    if v < 0:
        out[0] = b'-'
        return 1 + _put_uint(out + 1, <uint32_t>(-(<int64_t>v)))
    return _put_uint(out, <uint32_t>v)


cdef inline int _put_ipv4(char* out, const unsigned char* a) noexcept nogil:
    cdef int n = 0, i
    for i in range(4):
        if i:
            out[n] = b'.'
            n += 1
        n += _put_uint(out + n, a[i])
    return n


cdef inline int _put_hex16(char* out, unsigned int x) noexcept nogil:
    cdef int n = 0, j = 12
    while j > 0 and ((x >> j) & 15) == 0:
        j -= 4
    while j >= 0:
        out[n] = rs_hex_lower_digits[(x >> j) & 15]
        n += 1
        j -= 4
    return n


cdef int format_host_into(const unsigned char* a, int alen, int32_t port, char* out) noexcept nogil:
    """'a.b.c.d:port' or '[rfc5952]:port' into out (HOST_TEXT bytes); returns the length."""
    cdef int n = 0, i, j, best_start = -1, best_len = 0, run_start = -1, run_len = 0
    cdef unsigned int g[8]
    cdef bint mapped
    if alen == 4:
        n = _put_ipv4(out, a)
    else:
        out[0] = b'['
        n = 1
        mapped = True
        for i in range(10):
            if a[i] != 0:
                mapped = False
                break
        if mapped and a[10] == 0xFF and a[11] == 0xFF:
            memcpy(out + n, <const char*>b"::ffff:", 7)
            n += 7
            n += _put_ipv4(out + n, a + 12)
        else:
            for i in range(8):
                g[i] = (<unsigned int>a[2 * i] << 8) | a[2 * i + 1]
                if g[i] == 0:
                    if run_start < 0:
                        run_start = i
                        run_len = 0
                    run_len += 1
                    if run_len > best_len:
                        best_len = run_len
                        best_start = run_start
                else:
                    run_start = -1
            if best_len < 2:
                best_start = -1
            i = 0
            j = 0       # 1: a group was written since the last '::' (needs a ':' before)
            while i < 8:
                if i == best_start:
                    out[n] = b':'
                    out[n + 1] = b':'
                    n += 2
                    i += best_len
                    j = 0
                    continue
                if j:
                    out[n] = b':'
                    n += 1
                n += _put_hex16(out + n, g[i])
                j = 1
                i += 1
        out[n] = b']'
        n += 1
    out[n] = b':'
    n += 1
    n += _put_int(out + n, port)
    return n


def format_host(raw, int32_t port):
    """Raw 4- or 16-byte address and port -> 'a.b.c.d:port' or '[v6]:port' (RFC 5952, and
    an IPv4-mapped address as '[::ffff:a.b.c.d]:port' on every Python version)."""
    cdef const unsigned char[::1] v = raw
    cdef char out[HOST_TEXT]
    if v.shape[0] not in (4, 16):
        raise ValueError(f"address must be 4 or 16 bytes, got {v.shape[0]}")
    cdef int n = format_host_into(&v[0], <int>v.shape[0], port, out)
    return out[:n].decode("ascii")


cdef int msg_id_into(const unsigned char* host, int32_t host_len, int32_t port, int64_t offset,
                     char* out) noexcept nogil:
    cdef unsigned char buf[28]
    memcpy(buf, host, host_len)
    rs_put_u32(<char*>buf + host_len, <uint32_t>port)
    rs_put_u64(<char*>buf + host_len + 4, <unsigned long long>offset)
    rs_hex_upper(out, buf, host_len + 12)
    return msg_id_length(host_len)


cdef str msg_id_text(const unsigned char* host, int32_t host_len, int32_t port, int64_t offset):
    cdef object s = PyUnicode_New(msg_id_length(host_len), 127)
    msg_id_into(host, host_len, port, offset, <char*>PyUnicode_DATA(s))
    return s


def make_msg_id(store_host, int64_t offset):
    """offsetMsgId of a record at offset stored by store_host ('ip:port')."""
    raw, port = parse_host(store_host)
    return msg_id_text(<const unsigned char*>PyBytes_AS_STRING(raw), len(raw), port, offset)


def parse_msg_id(str msg_id not None):
    """offsetMsgId -> (store host 'ip:port', CommitLog offset). ValueError naming msg_id."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"msg_id must be 32 or 56 hex characters, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"msg_id {msg_id!r} is not hexadecimal") from None
    alen = len(raw) - 12
    port = int.from_bytes(raw[alen:alen + 4], "big")
    if port > 65535:
        raise ValueError(f"msg_id {msg_id!r} names port {port}, not a TCP port (0-65535)")
    offset = int.from_bytes(raw[alen + 4:], "big", signed=True)
    return format_host(raw[:alen], port), offset
