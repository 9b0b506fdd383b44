#include "stack/iwarp/mpa.h"

#include <algorithm>
#include <cstring>

namespace softrdma::iwarp {

std::vector<uint8_t> mpa_build(bool reply, const MpaParams& p) {
  const bool v2 = p.rev == kMpaRev2;
  size_t pd_len = p.private_data.size() + (v2 ? sizeof(MpaV2Params) : 0);
  std::vector<uint8_t> out(sizeof(MpaRrHdr) + pd_len);
  auto* h = reinterpret_cast<MpaRrHdr*>(out.data());
  std::memcpy(h->key, reply ? kMpaKeyRep : kMpaKeyReq, kMpaKeyLen);
  h->flags = static_cast<uint8_t>((p.markers ? kMpaFlagMarkers : 0) | (p.crc ? kMpaFlagCrc : 0) |
                                  (reply && p.reject ? kMpaFlagReject : 0));
  h->rev = p.rev;
  h->pd_len.set(static_cast<uint16_t>(pd_len));
  uint8_t* pd = out.data() + sizeof(MpaRrHdr);
  if (v2) {
    auto* v = reinterpret_cast<MpaV2Params*>(pd);
    v->ird.set(static_cast<uint16_t>((p.p2p ? kMpaV2PeerToPeer : 0) |
                                     (p.rtr_send ? kMpaV2SendRtr : 0) |
                                     (p.ird & kMpaV2IrdOrdMask)));
    v->ord.set(static_cast<uint16_t>((p.rtr_write ? kMpaV2WriteRtr : 0) |
                                     (p.rtr_read ? kMpaV2ReadRtr : 0) |
                                     (p.ord & kMpaV2IrdOrdMask)));
    pd += sizeof(MpaV2Params);
  }
  if (!p.private_data.empty()) std::memcpy(pd, p.private_data.data(), p.private_data.size());
  return out;
}

MpaStatus MpaReader::feed(const uint8_t* data, size_t len, size_t* used) {
  size_t n = 0;
  if (have_ < sizeof(MpaRrHdr)) {
    n = std::min(len, sizeof(MpaRrHdr) - have_);
    std::memcpy(hdr_ + have_, data, n);
    have_ += n;
    if (have_ < sizeof(MpaRrHdr)) {
      *used = n;
      return MpaStatus::kNeedMore;
    }
    if (MpaStatus s = parse_header(); s != MpaStatus::kNeedMore) {
      *used = n;
      return s;
    }
  }
  size_t take = std::min(len - n, pd_len_ - pd_.size());
  pd_.insert(pd_.end(), data + n, data + n + take);
  *used = n + take;
  return pd_.size() < pd_len_ ? MpaStatus::kNeedMore : finish();
}

MpaStatus MpaReader::parse_header() {
  const auto* h = reinterpret_cast<const MpaRrHdr*>(hdr_);
  if (std::memcmp(h->key, reply_ ? kMpaKeyRep : kMpaKeyReq, kMpaKeyLen) != 0)
    return MpaStatus::kBadKey;
  if (h->rev != kMpaRev1 && h->rev != kMpaRev2) return MpaStatus::kBadRev;
  pd_len_ = h->pd_len.get();
  if (pd_len_ > kMpaMaxPrivateData) return MpaStatus::kBadLength;
  if (h->rev == kMpaRev2 && pd_len_ < sizeof(MpaV2Params)) return MpaStatus::kBadLength;
  params_.markers = h->flags & kMpaFlagMarkers;
  params_.crc = h->flags & kMpaFlagCrc;
  params_.reject = reply_ && (h->flags & kMpaFlagReject);
  params_.rev = h->rev;
  pd_.reserve(pd_len_);
  return pd_len_ == 0 ? finish() : MpaStatus::kNeedMore;
}

MpaStatus MpaReader::finish() {
  size_t skip = 0;
  if (params_.rev == kMpaRev2) {
    const auto* v = reinterpret_cast<const MpaV2Params*>(pd_.data());
    uint16_t ird = v->ird.get(), ord = v->ord.get();
    params_.p2p = ird & kMpaV2PeerToPeer;
    params_.rtr_send = ird & kMpaV2SendRtr;
    params_.rtr_write = ord & kMpaV2WriteRtr;
    params_.rtr_read = ord & kMpaV2ReadRtr;
    params_.ird = ird & kMpaV2IrdOrdMask;
    params_.ord = ord & kMpaV2IrdOrdMask;
    skip = sizeof(MpaV2Params);
  } else {
    params_.p2p = params_.rtr_send = params_.rtr_write = params_.rtr_read = false;
  }
  params_.private_data.assign(pd_.begin() + static_cast<long>(skip), pd_.end());
  return MpaStatus::kDone;
}

MpaParams mpa_answer(const MpaParams& req, const MpaParams& ours, MpaResult* out) {
  MpaParams rep = ours;
  rep.rev = std::min(req.rev, ours.rev);
  rep.crc = ours.crc || req.crc;
  out->rev = rep.rev;
  out->crc = rep.crc;
  out->tx_markers = req.markers;
  out->rx_markers = ours.markers;
  out->rtr = Rtr::kNone;
  if (rep.rev == kMpaRev2) {
    // Grant no more outstanding reads than the peer can take (its IRD).
    out->ord = std::min(ours.ord, req.ird);
    out->ird = ours.ird;
    rep.ord = out->ord;
    rep.ird = out->ird;
    rep.p2p = req.p2p && ours.p2p;
    rep.rtr_write = rep.rtr_read = rep.rtr_send = false;
    if (rep.p2p) {
      if (req.rtr_write) rep.rtr_write = true, out->rtr = Rtr::kWrite;
      else if (req.rtr_send) rep.rtr_send = true, out->rtr = Rtr::kSend;
      else if (req.rtr_read) rep.rtr_read = true, out->rtr = Rtr::kRead;
      else rep.p2p = false;
    }
  } else {
    out->ord = ours.ord;
    out->ird = ours.ird;
  }
  return rep;
}

bool mpa_settle(const MpaParams& req, const MpaParams& rep, MpaResult* out) {
  if (rep.rev > req.rev) return false;
  out->rev = rep.rev;
  out->crc = req.crc || rep.crc;
  out->tx_markers = rep.markers;
  out->rx_markers = req.markers;
  out->rtr = Rtr::kNone;
  out->ord = req.ord;
  out->ird = req.ird;
  if (rep.rev != kMpaRev2) return true;
  out->ord = std::min(req.ord, rep.ird);
  if (rep.p2p) {
    int chosen = rep.rtr_write + rep.rtr_read + rep.rtr_send;
    if (chosen != 1) return false;
    if (rep.rtr_write && req.rtr_write) out->rtr = Rtr::kWrite;
    else if (rep.rtr_read && req.rtr_read) out->rtr = Rtr::kRead;
    else if (rep.rtr_send && req.rtr_send) out->rtr = Rtr::kSend;
    else return false;
  }
  return true;
}

const char* to_string(MpaStatus s) {
  switch (s) {
    case MpaStatus::kNeedMore: return "need more";
    case MpaStatus::kDone: return "done";
    case MpaStatus::kBadKey: return "bad key";
    case MpaStatus::kBadRev: return "bad revision";
    case MpaStatus::kBadLength: return "bad private data length";
  }
  return "?";
}

}  // namespace softrdma::iwarp
