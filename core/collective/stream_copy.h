// A copy whose stores bypass the CPU's caches (non-temporal stores), for
// buffers another process reads next. A plain store to a line that a peer
// under another cache has read must first take the peer's copy away (a
// read for ownership across the CPU complexes); on a machine whose CPUs
// sit under different caches that made writes 4-12x slower than these.
#pragma once

#include <cstddef>

namespace ringcc {

// True where stream_copy bypasses the caches (x86-64); elsewhere it is a
// plain memcpy.
bool stream_copy_bypasses_cache();

// memcpy(dst, src, bytes) with non-temporal stores, fenced: the stores are
// visible to other CPUs before any later store of this thread (the release
// of a phase word).
void stream_copy(void* dst, const void* src, size_t bytes);

}  // namespace ringcc
