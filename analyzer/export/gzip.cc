#include "export/gzip.h"

#include <zlib.h>

#include <algorithm>

namespace heapsnap::exporter {

bool gzip(std::string_view data, std::string *out, std::string *error) {
  z_stream zs{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    *error = "zlib: deflateInit2 failed";
    return false;
  }
  // zlib counts in 32-bit uInt: feed and drain in chunks so inputs past 4 GiB work too (the loop
  // of zlib's zpipe.c example: Z_BUF_ERROR in between only means "no progress possible now").
  constexpr size_t kChunk = size_t(1) << 20;
  size_t base = out->size(), pos = 0;
  int flush, rc = Z_OK;
  do {
    size_t n = std::min(kChunk, data.size() - pos);
    zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data() + pos));
    zs.avail_in = uInt(n);
    pos += n;
    flush = pos == data.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      size_t old = out->size();
      out->resize(old + kChunk);
      zs.next_out = reinterpret_cast<Bytef *>(out->data() + old);
      zs.avail_out = uInt(kChunk);
      rc = deflate(&zs, flush);
      out->resize(old + kChunk - zs.avail_out);
    } while (rc != Z_STREAM_ERROR && zs.avail_out == 0);
  } while (rc != Z_STREAM_ERROR && flush != Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    *error = "zlib: deflate failed (" + std::to_string(rc) + ")";
    out->resize(base);
    return false;
  }
  return true;
}

}  // namespace heapsnap::exporter
