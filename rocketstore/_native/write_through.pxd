# Write-through of a mapped file: appends land in an anonymous buffer and are handed to the
# file with pwrite. The state lives in MappedFile (mapped_file.pxd); these functions run it.
from libc.stdint cimport int64_t


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)


cdef struct WriteThrough:
    char* buf               # the anonymous buffer appends land in (NULL: none)
    int64_t released_pos    # buffer pages below this were given back to the OS
    pthread_mutex_t mu      # one committer at a time (a flush round, commit/flush from Python)


cdef void init_write_through(WriteThrough* wt) noexcept nogil
cdef void destroy_write_through(WriteThrough* wt, int64_t size) noexcept nogil
cdef int open_buffer(WriteThrough* wt, int64_t size, int64_t wrote_pos) noexcept nogil
cdef int commit_through(WriteThrough* wt, int fd, int64_t* committed_pos, int64_t end,
                        int64_t file_size) noexcept nogil
cdef void close_buffer(WriteThrough* wt, int64_t size) noexcept nogil
