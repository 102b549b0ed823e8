// Shared by the CPU convolutions that keep a packed form of their weights between calls: the
// weights' fingerprint that the kept forms are matched by, and the bound on their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace ocrt::cpu {

// A 64-bit fingerprint of a layer's weights' bytes (a multiply-xorshift over 8-byte words): what
// the forms of weights kept between calls (Winograd's transforms, ops/cpu/winograd.cpp; the AMX
// panels, ops/cpu/conv_amx.cpp) are matched by, so that weights changed in place are never read
// stale.
inline uint64_t weights_fingerprint(const float* w, int64_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(w);
  const size_t n = (size_t)count * sizeof(float);
  // Four independent lanes, so that the multiplies overlap (one chain took 2.4 ms for 9.4 MB).
  uint64_t h[4] = {0x9e3779b97f4a7c15ull ^ n, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull, 0x27d4eb2f165667c5ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t v;
      std::memcpy(&v, bytes + i + 8 * l, 8);
      h[l] = (h[l] ^ v) * 0xff51afd7ed558ccdull;
      h[l] ^= h[l] >> 32;
    }
  uint64_t out = h[0] ^ (h[1] * 0x9e3779b97f4a7c15ull) ^ (h[2] * 0xc4ceb9fe1a85ec53ull) ^ (h[3] * 0xff51afd7ed558ccdull);
  for (; i < n; ++i) out = (out ^ bytes[i]) * 0xc4ceb9fe1a85ec53ull;
  return out ^ (out >> 29);
}

// The kept form whose `key` equals key, moved to the list's back (its newest use), or null.
// Called with the list's lock held.
template <class KeptList, class Key>
typename KeptList::value_type find_kept(KeptList& kept, const Key& key) {
  for (auto it = kept.begin(); it != kept.end(); ++it)
    if ((*it)->key == key) {
      kept.splice(kept.end(), kept, it);
      return kept.back();
    }
  return nullptr;
}

// The keys whose kept forms some call is making now. Where several threads run the same model
// (the predictor's CPU workers share one), a second call that meets a layer's weights while the
// first is still making their form waits for it (wait_made) instead of making a second copy:
// two copies at once, each kept, were 40-65 MiB more of crnn-en's peak RSS. (Until the
// thirty-fourth session that call took the layer's un-kept path instead, which for a batch
// transforms the weights again for every chunk of tiles: ocrt-infer's second worker spent
// more on its first batch so than waiting for the one transform.) The AMX panels
// (ops/cpu/conv_amx.cpp) are the exception: a call's own panels cost what the kept ones do, so
// a second call makes its own for that call rather than wait.
// claim, claim_or_wait, release and wait_made with the kept list's lock held; Making releases on
// every way out.
template <class Key>
class KeysInMaking {
 public:
  // Whether this caller may make key's form (nobody else is making it); if so, it is now.
  bool claim(const Key& key) {
    if (making(key)) return false;
    keys_.push_back(key);
    return true;
  }
  void release(const Key& key) {
    for (auto it = keys_.begin(); it != keys_.end(); ++it)
      if (*it == key) {
        keys_.erase(it);
        break;
      }
    made_.notify_all();
  }
  // Blocks until no call is making key's form (made, or its making threw); `lock` holds the
  // kept list's mutex on entry and on return.
  void wait_made(std::unique_lock<std::mutex>& lock, const Key& key) {
    made_.wait(lock, [&] { return !making(key); });
  }
  // claim, or where another call is making key's form, wait_made: true when this caller is to
  // make it, false when the form is there to be found now (or that making threw).
  bool claim_or_wait(std::unique_lock<std::mutex>& lock, const Key& key) {
    if (claim(key)) return true;
    wait_made(lock, key);
    return false;
  }

 private:
  bool making(const Key& key) const {
    for (const Key& k : keys_)
      if (k == key) return true;
    return false;
  }
  std::vector<Key> keys_;
  std::condition_variable made_;
};

// A claimed key, released under `mu` when it goes out of scope (made, or the making threw).
template <class Key>
class Making {
 public:
  Making(std::mutex& mu, KeysInMaking<Key>& keys, const Key& key) : mu_(mu), keys_(keys), key_(key) {}
  Making(const Making&) = delete;
  Making& operator=(const Making&) = delete;
  ~Making() {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.release(key_);
  }

 private:
  std::mutex& mu_;
  KeysInMaking<Key>& keys_;
  Key key_;
};

// The bytes of all the kept forms of a list (each form's `bytes`). Called with its lock held.
template <class KeptList>
size_t kept_bytes(const KeptList& kept) {
  size_t total = 0;
  for (const auto& e : kept) total += e->bytes;
  return total;
}

// Drops the kept forms least recently used (a list's front; newest use last) while all of them
// hold more than `limit` bytes (each form's `bytes`), keeping at least the newest. Called with
// the list's lock held.
template <class KeptList>
void drop_oldest_beyond(KeptList& kept, size_t limit) {
  size_t total = kept_bytes(kept);
  while (total > limit && kept.size() > 1) {
    total -= kept.front()->bytes;
    kept.pop_front();
  }
}

}  // namespace ocrt::cpu
