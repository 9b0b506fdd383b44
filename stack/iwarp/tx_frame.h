// One FPDU on its way out: a gather list of header, payload pieces, pad and
// CRC, with MPA markers (RFC 5044 §5) inserted every 512 octets of the
// stream when the peer asked for them. The CRC covers everything from the
// FPDU's first octet up to the CRC field, markers included (RFC 5044 §6.1).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <cstring>

#include "stack/common/crc32c.h"
#include "stack/iwarp/wire.h"

namespace softrdma::iwarp {

class TxFrame {
 public:
  static constexpr int kMaxIov = 320;
  static constexpr int kMaxMarkers = 140;

  TxFrame(bool markers, bool crc, uint64_t stream_pos)
      : markers_(markers), crc_on_(crc), pos_(stream_pos), start_(stream_pos) {}

  // FPDU content before the CRC field (header, payload, pad).
  bool add(const void* p, size_t n) { return put(static_cast<const uint8_t*>(p), n, true); }

  // Appends the CRC field: CRC32c, least significant octet first, or zero
  // when CRC was not negotiated.
  bool finish() {
    uint32_t v = crc_on_ ? crc32c_final(crc_) : 0;
    for (int i = 0; i < 4; ++i) crc_bytes_[i] = static_cast<uint8_t>(v >> (8 * i));
    return put(crc_bytes_, sizeof(crc_bytes_), false);
  }

  const iovec* iov() const { return iov_; }
  int iovcnt() const { return n_; }
  size_t bytes() const { return static_cast<size_t>(pos_ - start_); }
  uint64_t end_pos() const { return pos_; }
  int markers() const { return nmarkers_; }

  // Wire octets an FPDU of `len` octets takes once markers are added.
  static size_t with_markers(uint64_t pos, size_t len) {
    size_t m = 0;
    // Count marker slots hit while laying out len data octets from pos.
    uint64_t p = pos;
    size_t left = len;
    while (left > 0) {
      if (p % kMpaMarkerInterval == 0) {
        p += kMpaMarkerSize;
        ++m;
      }
      size_t take = kMpaMarkerInterval - p % kMpaMarkerInterval;
      if (take > left) take = left;
      p += take;
      left -= take;
    }
    return len + m * kMpaMarkerSize;
  }

 private:
  bool push(const void* p, size_t n, bool crc) {
    if (n == 0) return true;
    if (n_ == kMaxIov) return false;
    iov_[n_++] = {const_cast<void*>(p), n};
    if (crc && crc_on_) crc_ = crc32c_update(crc_, p, n);
    pos_ += n;
    return true;
  }
  bool put(const uint8_t* p, size_t n, bool crc) {
    while (n > 0) {
      if (markers_ && pos_ % kMpaMarkerInterval == 0) {
        if (nmarkers_ == kMaxMarkers) return false;
        MpaMarker& m = marker_[nmarkers_++];
        m.rsvd.set(0);
        m.fpduptr.set(static_cast<uint16_t>(pos_ - start_));
        if (!push(&m, sizeof(m), crc)) return false;
      }
      size_t take = n;
      if (markers_) {
        size_t room = kMpaMarkerInterval - pos_ % kMpaMarkerInterval;
        if (take > room) take = room;
      }
      if (!push(p, take, crc)) return false;
      p += take;
      n -= take;
    }
    return true;
  }

  bool markers_;
  bool crc_on_;
  uint64_t pos_;
  uint64_t start_;
  uint32_t crc_ = kCrc32cInit;
  int n_ = 0;
  int nmarkers_ = 0;
  iovec iov_[kMaxIov];
  MpaMarker marker_[kMaxMarkers];
  uint8_t crc_bytes_[4];
};

}  // namespace softrdma::iwarp
