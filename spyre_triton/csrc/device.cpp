// The `spyre` PyTorch device (PrivateUse1): guard, hooks, allocator, a few aten kernels and a
// boxed CPU fallback that works on the device memory in place.
//
// Device memory is host memory owned by the runtime's allocation tables (runtime/devmem.h), reached
// through the `spyre_triton._runtime._devmem_api` capsule. So a spyre tensor can be viewed as a CPU
// tensor over the same bytes: the fallback runs CPU kernels on such aliases, with no copies.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/strides.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor to and from Python (cpu_alias)
#include <torch/library.h>

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "devmem.h"
#include "fp.h"  // DLFloat16 rounding (SPYRE_NUMERICS=dl16); header-only here

namespace py = pybind11;
using c10::DeviceIndex;
using c10::DeviceType;
using torch::jit::Stack;

namespace {

constexpr DeviceType kSpyre = DeviceType::PrivateUse1;
const SpyreDevmemAPI* g_api = nullptr;  // set at module import

const SpyreDevmemAPI& api() {
  TORCH_CHECK(g_api != nullptr, "spyre: the runtime (spyre_triton._runtime) is not loaded");
  return *g_api;
}

DeviceIndex device_count() noexcept { return g_api ? (DeviceIndex)g_api->device_count() : 0; }

// ---------------------------------------------------------------------------------------------
// Current device (per thread) and the guard.
thread_local DeviceIndex tl_device = 0;

void check_index(DeviceIndex i) {
  TORCH_CHECK(i >= 0 && i < device_count(), "spyre: invalid device index ", (int)i, " (",
              (int)device_count(), " device(s); set SPYRE_DEVICE_COUNT for more)");
}

struct SpyreGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr DeviceType static_type = kSpyre;
  DeviceType type() const override { return kSpyre; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != tl_device) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kSpyre, tl_device); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kSpyre, "spyre guard given a ", d, " device");
    if (d.index() < 0) return;
    check_index(d.index());
    tl_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) tl_device = d.index();
  }
  static c10::Stream stream0(c10::Device d) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kSpyre, d.index() < 0 ? tl_device : d.index()), 0);
  }
  c10::Stream getStream(c10::Device d) const override { return stream0(d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return stream0(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return stream0(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return stream0(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return stream0(s.device()); }
  DeviceIndex deviceCount() const noexcept override { return device_count(); }
  // torch.accelerator.get_device_capability: every dtype but the quantized ones (device memory is
  // host memory, and the CPU fallback converts between them; quantized tensors have no spyre kernels).
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability cap;
    for (auto i : {c10::kIndex_QInt8, c10::kIndex_QUInt8, c10::kIndex_QInt32, c10::kIndex_QUInt4x2,
                   c10::kIndex_QUInt2x4})
      cap.capability_data.capability_bits &= ~(1ULL << i);
    return cap;
  }
  // Events: the simulator runs every launch to completion before returning, so an event is
  // complete as soon as it is recorded. It holds the host time of its recording (for timing).
  void record(void** event, const c10::Stream&, const DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new double(0);
    *static_cast<double*>(*event) =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void destroyEvent(void* event, const DeviceIndex) const noexcept override { delete static_cast<double*>(event); }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const DeviceIndex) const override {}
  double elapsedTime(void* e1, void* e2, const DeviceIndex) const override {
    TORCH_CHECK(e1 && e2, "spyre: elapsed_time needs two recorded events");
    return *static_cast<double*>(e2) - *static_cast<double*>(e1);
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, SpyreGuardImpl);

// ---------------------------------------------------------------------------------------------
// SPYRE_NUMERICS (spyre_triton.numerics). In dl16 mode f16 device memory holds DLFloat16's bits, as the
// card's does (fp.h); in ieee mode binary16's. The host converts wherever it reads or writes f16 device
// data (copies, fill_, item, the fallback's aliases, collectives), and a mode switch converts the f16
// data already on the cards: the blocks made for f16 tensors are tracked for that.
int g_numerics = NUMERICS_IEEE;
bool dl16_mode() { return g_numerics == NUMERICS_DL16; }
bool dl16_f16(const at::Tensor& t) { return dl16_mode() && t.scalar_type() == at::kHalf; }

// Never destroyed: storages are still freed while the process exits.
std::mutex& g_f16_mu = *new std::mutex;
std::unordered_map<const void*, size_t>& g_f16_blocks = *new std::unordered_map<const void*, size_t>;
void track_f16(const void* p, size_t nbytes) {
  if (p == nullptr || nbytes == 0) return;
  std::lock_guard<std::mutex> lk(g_f16_mu);
  g_f16_blocks[p] = nbytes;  // device block -> bytes, of the storages made for f16 tensors
}
bool is_f16_block(const void* p) {
  std::lock_guard<std::mutex> lk(g_f16_mu);
  return g_f16_blocks.count(p) != 0;
}
void track_f16_storage(const at::Tensor& t) {
  if (t.scalar_type() == at::kHalf && t.storage().data() != nullptr)
    track_f16(t.storage().data(), t.storage().nbytes());
}
// n words of f16 data: binary16 -> DLFloat16 bits (to_dl16) or back
void convert_f16_words(uint16_t* w, size_t n, bool to_dl16) {
  for (size_t i = 0; i < n; i++) w[i] = to_dl16 ? sp_f16_to_dl16(w[i]) : sp_dl16_to_f16(w[i]);
}

// ---------------------------------------------------------------------------------------------
// Allocator: allocates on the current device (kernels set it with a DeviceGuard).
void spyre_delete(void* p) {
  if (p == nullptr || g_api == nullptr) return;
  {
    std::lock_guard<std::mutex> lk(g_f16_mu);
    g_f16_blocks.erase(p);
  }
  int n = g_api->device_count();
  for (int d = 0; d < n; d++)
    if (g_api->free(d, p) == 0) return;
}

// A DeviceAllocator, so torch.accelerator's memory functions (memory_allocated, memory_stats,
// empty_cache, get_memory_info, ...) reach the runtime's allocation tables as torch.spyre's do.
struct SpyreAllocator final : c10::DeviceAllocator {
  bool initialized() override { return g_api != nullptr; }
  void emptyCache(c10::MempoolId_t) override {
    for (int d = 0; d < device_count(); d++) api().empty_cache(d);
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one in-order stream per card
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(DeviceIndex dev) override {
    if (dev < 0) dev = tl_device;
    check_index(dev);
    using c10::CachingAllocator::StatType;
    c10::CachingDeviceAllocator::DeviceStats st;
    auto set = [](c10::CachingAllocator::StatArray& a, int64_t cur, int64_t peak) {
      auto& s = a[static_cast<size_t>(StatType::AGGREGATE)];
      s.current = cur;
      s.peak = peak;
    };
    const auto& A = api();
    const int64_t alloc = (int64_t)A.memory_allocated(dev), peak = (int64_t)A.max_memory_allocated(dev);
    const int64_t count = (int64_t)A.allocation_count(dev);
    set(st.allocated_bytes, alloc, peak);
    set(st.active_bytes, alloc, peak);
    set(st.requested_bytes, alloc, peak);
    set(st.reserved_bytes, (int64_t)A.memory_reserved(dev), (int64_t)A.max_memory_reserved(dev));
    set(st.inactive_split_bytes, (int64_t)A.memory_cached(dev), (int64_t)A.memory_cached(dev));
    set(st.allocation, count, count);
    set(st.active, count, count);
    return st;
  }
  void resetAccumulatedStats(DeviceIndex) override {}  // the runtime keeps no accumulated counts
  void resetPeakStats(DeviceIndex dev) override {
    if (dev < 0) dev = tl_device;
    check_index(dev);
    api().reset_peak_memory_stats(dev);
  }
  std::pair<size_t, size_t> getMemoryInfo(DeviceIndex dev) override {
    if (dev < 0) dev = tl_device;
    check_index(dev);
    const size_t total = api().memory_limit(dev), used = api().memory_allocated(dev);
    return {total > used ? total - used : 0, total};
  }
  c10::DataPtr allocate(size_t n) override {
    DeviceIndex dev = tl_device;
    check_index(dev);
    void* p = api().alloc(dev, n);
    TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr, "spyre:", (int)dev, " out of memory: tried to allocate ", n,
                     " bytes with ", api().memory_allocated(dev), " bytes allocated (limit ", api().memory_limit(dev),
                     " bytes of the card's ", api().device_memory_capacity(),
                     "; set SPYRE_DEVICE_MEMORY_BYTES or torch.spyre.set_per_process_memory_fraction)");
    return {p, p, &spyre_delete, c10::Device(kSpyre, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &spyre_delete; }
  // Allocator::clone (a copy-on-write storage materialising) copies through here: the copy of an f16
  // block is one too.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
    if (is_f16_block(src)) track_f16(dest, count);
  }
};
SpyreAllocator g_allocator;
REGISTER_ALLOCATOR(kSpyre, &g_allocator);

void resize_bytes(c10::StorageImpl* s, size_t nbytes) {
  TORCH_CHECK(s->resizable(), "Trying to resize storage that is not resizable");
  c10::DeviceGuard g(s->device());
  c10::DataPtr fresh = g_allocator.allocate(nbytes);
  size_t keep = std::min(nbytes, s->nbytes());
  if (keep > 0 && s->data() != nullptr) std::memcpy(fresh.get(), s->data(), keep);
  if (is_f16_block(s->data())) track_f16(fresh.get(), nbytes);
  s->set_data_ptr_noswap(std::move(fresh));
  s->set_nbytes(nbytes);
}

// Allocates device memory for CPU aliases: a CPU kernel that grows an out= argument then writes
// into device memory, which sync_back() hands to the spyre storage without copying.
struct AliasAllocator final : c10::Allocator {
  DeviceIndex dev = 0;
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceGuard g(c10::Device(kSpyre, dev));
    c10::DataPtr p = g_allocator.allocate(n);
    p.unsafe_set_device(c10::Device(c10::kCPU));
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return &spyre_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
AliasAllocator* alias_allocator(DeviceIndex d) {
  static AliasAllocator allocs[SPYRE_MAX_DEVICES];
  allocs[d].dev = d;
  return &allocs[d];
}

// ---------------------------------------------------------------------------------------------
// Random numbers: a spyre generator wraps a CPU generator; the CPU kernels draw from it.
struct SpyreGenerator final : c10::GeneratorImpl {
  at::Generator cpu;
  explicit SpyreGenerator(DeviceIndex i, uint64_t seed = c10::default_rng_seed_val)
      : c10::GeneratorImpl(c10::Device(kSpyre, i), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        cpu(at::make_generator<at::CPUGeneratorImpl>(seed)) {}
  void set_current_seed(uint64_t s) override { cpu.set_current_seed(s); }
  void set_offset(uint64_t o) override { cpu.set_offset(o); }
  uint64_t get_offset() const override { return cpu.get_offset(); }
  uint64_t current_seed() const override { return cpu.current_seed(); }
  uint64_t seed() override { return cpu.seed(); }
  void set_state(const c10::TensorImpl& s) override { cpu.unsafeGetGeneratorImpl()->set_state(s); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return cpu.unsafeGetGeneratorImpl()->get_state();
  }
  static DeviceType device_type() { return kSpyre; }

 private:
  SpyreGenerator* clone_impl() const override {
    auto* g = new SpyreGenerator(device().index());
    g->cpu = cpu.clone();
    return g;
  }
};

const at::Generator& default_generator(DeviceIndex i) {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (DeviceIndex d = 0; d < SPYRE_MAX_DEVICES; d++) v.push_back(at::make_generator<SpyreGenerator>(d));
    return v;
  }();
  if (i < 0) i = tl_device;
  check_index(i);
  return gens[i];
}

at::Generator cpu_generator_of(const at::Generator& g) {
  return static_cast<SpyreGenerator*>(g.unsafeGetGeneratorImpl())->cpu;
}

// ---------------------------------------------------------------------------------------------
// Hooks (AOTAutograd, torch.accelerator and generators go through them).
struct SpyreHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(DeviceIndex) const override { return true; }
  void init() const override {}
  DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(DeviceIndex d) const override { check_index(d); tl_device = d; }
  DeviceIndex getCurrentDevice() const override { return tl_device; }
  DeviceIndex exchangeDevice(DeviceIndex d) const override {
    auto old = tl_device;
    setCurrentDevice(d);
    return old;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(DeviceIndex i) const override { return default_generator(i); }
  at::Generator getNewGenerator(DeviceIndex i) const override {
    return at::make_generator<SpyreGenerator>(i < 0 ? tl_device : i);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    int d = api().device_of(reinterpret_cast<uintptr_t>(data));
    TORCH_CHECK(d >= 0, "spyre: ", data, " is not in device memory");
    return c10::Device(kSpyre, (DeviceIndex)d);
  }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return at::getCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& s, size_t n) const override {
    resize_bytes(s.unsafeGetStorageImpl(), n);
  }
};

// ---------------------------------------------------------------------------------------------
// The math bits (conjugate, negative, zero) are part of what a tensor means, not of its memory: every
// tensor made here from another carries them over.
void copy_math_bits(const at::Tensor& dst, const at::Tensor& src) {
  dst._set_conj(src.is_conj());
  dst._set_neg(src.is_neg());
  dst.unsafeGetTensorImpl()->_set_zero(src._is_zerotensor());
}

// A tensor whose elements reach past the end of its storage (its storage was resized, or set_ gave it
// a bad geometry) would have the host read or write memory that is not its own: refuse it.
void check_in_storage(const at::Tensor& t) {
  if (t.numel() == 0 || t._is_zerotensor()) return;
  size_t need = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.dtype().itemsize(), t.storage_offset());
  TORCH_CHECK(need <= t.storage().nbytes(), "spyre: a tensor of shape ", t.sizes(), ", strides ", t.strides(),
              " and storage offset ", t.storage_offset(), " reaches byte ", need, " of its storage, which has ",
              t.storage().nbytes(), " bytes (was the storage resized?)");
}

// The bits of spyre tensor t (int16), over its device memory: mutable for writing.
at::Tensor bits_of(const at::Tensor& t, bool write) {
  void* p = write ? t.mutable_data_ptr() : const_cast<void*>(t.const_data_ptr());
  return at::from_blob(p, t.sizes(), t.strides(), at::TensorOptions().dtype(at::kShort));
}

// The values (a CPU f32 tensor) of spyre f16 tensor t, whose device memory holds DLFloat16 bits.
at::Tensor dl16_values(const at::Tensor& t) {
  at::Tensor bits = bits_of(t, false).contiguous();
  at::Tensor v = at::empty(t.sizes(), at::TensorOptions().dtype(at::kFloat));
  sp_dl16_to_f32_n(v.data_ptr<float>(), reinterpret_cast<const uint16_t*>(bits.const_data_ptr()), (size_t)v.numel());
  return t.is_neg() ? v.neg_() : v;
}

// Store `values` (a CPU tensor broadcastable to dst, any real dtype) into spyre f16 tensor dst as
// DLFloat16 bits.
void write_dl16(const at::Tensor& dst, const at::Tensor& values) {
  at::Tensor v = values.to(at::kFloat).expand(dst.sizes()).contiguous();
  if (dst.is_neg()) v = v.neg();
  at::Tensor bits = at::empty(dst.sizes(), at::TensorOptions().dtype(at::kShort));
  sp_f32_to_dl16_n(reinterpret_cast<uint16_t*>(bits.data_ptr()), v.const_data_ptr<float>(), (size_t)v.numel());
  bits_of(dst, true).copy_(bits);
}

// ---------------------------------------------------------------------------------------------
// CPU aliases of spyre tensors. One CPU storage per spyre storage, so that CPU kernels see
// overlapping arguments as overlapping. The CPU storage is resizable: a CPU kernel that resizes an
// out= argument gets fresh host memory, which sync_back() moves to the device afterwards.
//
// In DLFloat16 mode the CPU kernels cannot read f16 device memory in place: an f16 tensor's alias is over
// a host copy of its storage decoded to binary16 (values beyond binary16's range become inf or 0 there:
// the CPU computes in IEEE fp16). write_back() encodes the words a kernel changed into device memory,
// and only those, so that values binary16 cannot hold survive where the kernel did not write.
struct Aliaser {
  struct Entry {
    c10::Storage spyre, cpu;
    char* base;
    size_t nbytes;
    bool decoded = false;            // base is a binary16 host copy of the device's DLFloat16 words
    std::vector<uint16_t> snapshot;  // decoded: the words as decoded, to find the ones a kernel wrote
  };
  std::vector<Entry> entries;
  std::vector<std::pair<at::Tensor, at::Tensor>> made;  // (CPU alias, spyre tensor); holds the aliases
  bool decode = dl16_mode();  // false: raw aliases of the device's bits (copies convert themselves)

  const Entry& entry_for(const c10::Storage& s, bool decoded) {
    for (auto& e : entries)
      if (e.spyre.unsafeGetStorageImpl() == s.unsafeGetStorageImpl() && e.decoded == decoded) return e;
    // data(), not mutable_data(): reading a copy-on-write storage (torch._lazy_clone) must not copy it.
    // The storages an op writes get memory of their own before any alias is made (own_written_storages).
    char* dev = const_cast<char*>(static_cast<const char*>(s.data()));
    const size_t n = s.nbytes();
    if (!decoded) {
      c10::Storage cpu(c10::Storage::use_byte_size_t(), n, c10::DataPtr(dev, c10::Device(c10::kCPU)),
                       alias_allocator(s.device().index()), /*resizable=*/true);
      entries.push_back({s, cpu, dev, n});
      return entries.back();
    }
    c10::DataPtr host = c10::GetCPUAllocator()->allocate(n);
    char* base = static_cast<char*>(host.get());
    std::vector<uint16_t> words(n / 2);
    if (n >= 2) std::memcpy(words.data(), dev, words.size() * 2);
    convert_f16_words(words.data(), words.size(), /*to_dl16=*/false);
    if (n > 0) {
      std::memcpy(base, words.data(), words.size() * 2);
      if (n % 2) base[n - 1] = dev[n - 1];
    }
    c10::Storage cpu(c10::Storage::use_byte_size_t(), n, std::move(host), alias_allocator(s.device().index()),
                     /*resizable=*/true);
    entries.push_back({s, cpu, base, n, true, std::move(words)});
    return entries.back();
  }
  // Encode the words kernels changed in decoded copies into device memory (a storage a kernel resized
  // or replaced is sync_back's: it encodes the new memory whole).
  void write_back() {
    for (auto& e : entries) {
      if (!e.decoded || e.cpu.data() != e.base || e.spyre.data() == nullptr) continue;
      const uint16_t* now = reinterpret_cast<const uint16_t*>(e.base);
      uint16_t* dev = static_cast<uint16_t*>(const_cast<void*>(e.spyre.data()));
      const size_t n = std::min(e.snapshot.size(), e.spyre.nbytes() / 2);
      for (size_t i = 0; i < n; i++)
        if (now[i] != e.snapshot[i]) dev[i] = sp_f16_to_dl16(now[i]);
    }
  }
  // One alias per spyre tensor: an op given the same tensor twice (ldexp_ is mul.out(self, other, out=self))
  // must see the same tensor twice, or TensorIterator resizes the out= where it refuses an in-place resize.
  at::Tensor to_cpu(const at::Tensor& t) {
    for (auto& [cpu, spyre] : made)
      if (spyre.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return cpu;
    if (is_sparse_any(t)) return sparse_to_cpu(t);
    check_in_storage(t);
    const bool decoded = decode && t.scalar_type() == at::kHalf;
    auto cpu = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(entry_for(t.storage(), decoded).cpu),
                                                        c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    cpu.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    copy_math_bits(cpu, t);
    made.emplace_back(cpu, t);
    return cpu;
  }
  // A sparse tensor is PyTorch's own (COO, or compressed: CSR, CSC, BSR, BSC) over index and value
  // tensors on the device; its CPU alias is the same sparse tensor over the members' CPU aliases.
  static bool is_sparse_any(const at::Tensor& t) { return t.is_sparse() || at::sparse_csr::is_sparse_compressed(t); }
  at::Tensor sparse_to_cpu(const at::Tensor& t) {
    auto cpu = sparse_like(t, c10::kCPU, [this](const at::Tensor& m) { return to_cpu(m); });
    made.emplace_back(cpu, t);
    return cpu;
  }
  // A sparse tensor of t's layout, sizes and flags on `dev`, whose members are member(t's members).
  template <class F>
  static at::Tensor sparse_like(const at::Tensor& t, c10::Device dev, F member) {
    c10::OptionalDeviceGuard g;  // ATen's sparse constructors make their first members on the current device
    if (dev.type() == kSpyre) g.reset_device(dev);
    if (t.is_sparse()) {
      auto* s = at::sparse::get_sparse_impl(t);
      return at::native::new_with_dims_and_tensor_sparse_symint(
          s->sparse_dim(), s->dense_dim(), t.sym_sizes(), member(s->indices()), member(s->values()), t.scalar_type(),
          at::kSparse, dev, std::nullopt, s->coalesced());
    }
    // Made directly, not through _sparse_compressed_tensor_unsafe: that validates the invariants when
    // torch.sparse.check_sparse_tensor_invariants is on, and an invalid input must meet the op's own check.
    auto* s = at::sparse_csr::get_sparse_csr_impl(t);
    auto key = dev.type() == kSpyre ? c10::DispatchKey::SparseCsrPrivateUse1 : c10::DispatchKey::SparseCsrCPU;
    auto out = at::detail::make_tensor<at::SparseCsrTensorImpl>(c10::DispatchKeySet(key), dev, t.layout(), t.dtype());
    at::sparse_csr::get_sparse_csr_impl(out)->set_member_tensors(
        member(s->compressed_indices()), member(s->plain_indices()), member(s->values()), t.sym_sizes());
    return out;
  }
  // The spyre storage whose memory holds CPU tensor r's data, or nullptr.
  const Entry* holder_of(const at::Tensor& r) const {
    const char* p = static_cast<const char*>(r.storage().data());
    for (auto& e : entries)
      if (p != nullptr && p >= e.base && p < e.base + std::max<size_t>(e.nbytes, 1)) return &e;
    for (auto& e : entries)  // zero-byte storages
      if (r.storage().unsafeGetStorageImpl() == e.cpu.unsafeGetStorageImpl() && r.storage().data() == e.base)
        return &e;
    return nullptr;
  }
};

bool is_spyre(const at::Tensor& t) { return t.defined() && t.device().type() == kSpyre; }

at::Tensor spyre_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory);

// A spyre tensor sharing the spyre storage that holds CPU tensor r (a view), with r's layout.
at::Tensor view_of(const Aliaser::Entry& e, const at::Tensor& r) {
  auto v = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(e.spyre),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), r.dtype());
  size_t bytes = static_cast<const char*>(r.storage().data()) - e.base;
  int64_t itemsize = r.dtype().itemsize();
  TORCH_CHECK(bytes % itemsize == 0, "spyre: misaligned view returned by a CPU kernel");
  v.unsafeGetTensorImpl()->set_sizes_and_strides(r.sizes(), r.strides(), r.storage_offset() + bytes / itemsize);
  copy_math_bits(v, r);
  return v;
}

at::Tensor spyre_efficientzerotensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                     std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                     std::optional<bool> pin_memory);

// A new spyre tensor on `dev` holding a copy of CPU tensor r.
at::Tensor upload(const at::Tensor& r, c10::Device dev) {
  if (r._is_zerotensor())  // no memory behind it: a spyre zero tensor of the same shape
    return spyre_efficientzerotensor(r.sizes(), r.scalar_type(), at::kStrided, dev, std::nullopt);
  at::Tensor out;
  if (r.is_non_overlapping_and_dense()) {
    out = spyre_empty_strided(r.sizes(), r.strides(), r.scalar_type(), at::kStrided, dev, std::nullopt);
    if (r.numel() > 0) std::memcpy(out.data_ptr(), r.data_ptr(), r.numel() * r.element_size());
    copy_math_bits(out, r);
  } else {
    out = spyre_empty_strided(r.sizes(), c10::contiguous_strides(r.sizes()), r.scalar_type(), at::kStrided, dev,
                              std::nullopt);
    Aliaser a;
    a.decode = false;
    a.to_cpu(out).copy_(r);
  }
  // both are dense: numel() words from the start
  if (dl16_f16(out)) convert_f16_words(static_cast<uint16_t*>(out.data_ptr()), out.numel(), /*to_dl16=*/true);
  return out;
}

// After a CPU kernel mutated the alias `cpu` of spyre tensor `t`, make t match it: same sizes and
// strides, and the same memory when the kernel gave the alias new memory: either it resized the
// alias storage (then the spyre storage takes the new memory, and its other views see it, as on the
// CPU) or it set_ the alias to another storage (then t gets a storage of its own).
void sync_back(Aliaser& a, const at::Tensor& t, const at::Tensor& cpu) {
  auto* impl = t.unsafeGetTensorImpl();
  if (const Aliaser::Entry* e = a.holder_of(cpu)) {  // still in device memory
    if (e->spyre.unsafeGetStorageImpl() != t.storage().unsafeGetStorageImpl())
      impl->set_storage_keep_dtype(e->spyre);
    size_t bytes = static_cast<const char*>(cpu.storage().data()) - e->base;
    impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset() + bytes / cpu.dtype().itemsize());
    return;
  }
  auto* csi = cpu.storage().unsafeGetStorageImpl();
  const size_t nbytes = csi->nbytes();
  c10::DataPtr dp;
  if (csi->data_ptr().get_deleter() == &spyre_delete && csi->allocator() == alias_allocator(t.get_device())) {
    dp = csi->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));  // device memory: move it
    csi->set_nbytes(0);
    dp.unsafe_set_device(t.device());
  } else {
    c10::DeviceGuard g(t.device());
    dp = g_allocator.allocate(nbytes);
    if (nbytes > 0) std::memcpy(dp.get(), csi->data(), nbytes);
  }
  if (dl16_f16(t) && dp.get() != nullptr) {  // the CPU kernel wrote binary16
    convert_f16_words(static_cast<uint16_t*>(dp.get()), nbytes / 2, /*to_dl16=*/true);
    track_f16(dp.get(), nbytes);
  }
  const Aliaser::Entry* resized = nullptr;
  for (auto& e : a.entries)
    if (e.cpu.unsafeGetStorageImpl() == csi) resized = &e;
  if (resized != nullptr) {
    auto* ssi = resized->spyre.unsafeGetStorageImpl();
    ssi->set_data_ptr_noswap(std::move(dp));
    ssi->set_nbytes(nbytes);
    if (ssi != t.storage().unsafeGetStorageImpl()) impl->set_storage_keep_dtype(resized->spyre);
  } else {
    impl->set_storage_keep_dtype(
        c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(dp), &g_allocator, /*resizable=*/true));
  }
  impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
}

// ---------------------------------------------------------------------------------------------
// Fallback counts.
std::mutex g_count_mu;
std::map<std::string, int64_t> g_counts;

void count(const c10::OperatorHandle& op) {
  const auto& n = op.operator_name();
  std::string key = n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
  std::lock_guard<std::mutex> lk(g_count_mu);
  g_counts[key]++;
}

bool is_generator_type(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::GeneratorType) return true;
  auto o = t->cast<c10::OptionalType>();
  return o && o->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// Ops whose CUDA kernels take CPU tensors beside device tensors on purpose: indices (indexing), copies
// between devices, the CPU lengths/batch sizes of packed sequences and CTC loss. Every other op on a
// device refuses a CPU input with dimensions (CUDA's generated device check); 0-dim CPU tensors are
// scalars and stay allowed, as TensorIterator allows them.
bool takes_cpu_inputs(const c10::OperatorName& op) {
  static const std::set<std::string> names = {
      "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_", "aten::_unsafe_index",
      "aten::_unsafe_index_put", "aten::_unsafe_masked_index", "aten::_unsafe_masked_index_put_accumulate",
      "aten::copy_", "aten::copy", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_to_copy",
      "aten::to", "aten::_pack_padded_sequence", "aten::_pad_packed_sequence", "aten::ctc_loss",
      "aten::_ctc_loss", "aten::_use_cudnn_ctc_loss", "aten::lstm", "aten::gru", "aten::rnn_tanh",
      "aten::rnn_relu", "aten::is_set_to", "aten::_has_compatible_shallow_copy_type", "aten::is_same_size"};
  return names.count(op.name) > 0;
}

// A tensor that a spyre op cannot take as an input: on another device, and not a 0-dim CPU scalar.
bool foreign_input(const at::Tensor& t) {
  return t.defined() && !is_spyre(t) && (t.dim() > 0 || t.device().type() != c10::kCPU);
}

// Arguments that an op writes though its schema does not mark them written: batch norm's running statistics
// (PyTorch's OpInfos allow the same arguments to materialise, allow_cow_input_materialize_forward).
bool written_unmarked(const c10::OperatorName& op, const c10::Argument& arg) {
  return (op.name == "aten::native_batch_norm" || op.name == "aten::batch_norm_update_stats") &&
         (arg.name() == "running_mean" || arg.name() == "running_var");
}

// A copy-on-write storage that an op writes is copied now, as a CPU kernel's mutable_data() would, so the
// aliases made afterwards point at the memory the op writes. Storages that are only read stay shared.
void own_written_storages(const c10::FunctionSchema& schema, const Stack& stack, size_t first) {
  auto own = [](const c10::IValue& v) {
    if (v.isTensor() && is_spyre(v.toTensor()) && v.toTensor().layout() == at::kStrided)
      v.toTensor().storage().mutable_data();
  };
  for (size_t i = 0; i < schema.arguments().size(); i++) {
    const auto& arg = schema.arguments()[i];
    const bool written = arg.alias_info() && arg.alias_info()->isWrite();
    if (!written && !written_unmarked(schema.operator_name(), arg)) continue;
    const c10::IValue& v = stack[first + i];
    if (v.isList())
      for (const c10::IValue& e : v.toListRef()) own(e);
    else
      own(v);
  }
}

// Run `cpu_op` on the arguments on top of `stack` (laid out as cpu_op's schema) with every spyre
// tensor replaced by its CPU alias, then map the results back to spyre tensors.
void run_on_cpu(const c10::OperatorHandle& cpu_op, Stack* stack) {
  const auto& schema = cpu_op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t first = stack->size() - nargs;
  Aliaser a;
  std::optional<c10::Device> dev;
  std::vector<size_t> none_generators;
  std::vector<std::pair<at::Tensor, at::Tensor>> mutated;  // (spyre, cpu alias) of written arguments
  std::vector<std::pair<at::Tensor, at::Tensor>> outs16;   // the same of decoded f16 out= arguments
  std::vector<c10::IValue> orig(stack->begin() + first, stack->end());
  std::optional<size_t> foreign_out;  // a written (out= or in-place) argument on another device
  std::optional<at::Tensor> foreign_in;  // an input that is neither on spyre nor a CPU scalar
  std::string foreign_in_arg;
  bool any_spyre = false;  // a spyre device argument alone (is_pinned, _pin_memory) mixes nothing

  own_written_storages(schema, *stack, first);
  auto convert = [&](const at::Tensor& t) {
    if (!dev) dev = t.device();
    any_spyre = true;
    return a.to_cpu(t);
  };
  auto note_input = [&](const at::Tensor& t, const c10::Argument& arg) {
    if (foreign_in || !foreign_input(t) || arg.alias_info()) return;  // annotated: written, or a view's base
    foreign_in = t;
    foreign_in_arg = arg.name();
  };
  for (size_t i = 0; i < nargs; i++) {
    c10::IValue& v = (*stack)[first + i];
    const auto& arg = schema.arguments()[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && !is_spyre(t) && arg.alias_info() && arg.alias_info()->isWrite() && !foreign_out)
        foreign_out = i;
      note_input(t, arg);
      if (!is_spyre(t)) continue;
      at::Tensor c = convert(t);
      if (arg.alias_info() && arg.alias_info()->isWrite()) mutated.emplace_back(t, c);
      if (arg.is_out() && a.decode && c.scalar_type() == at::kHalf && !Aliaser::is_sparse_any(t))
        outs16.emplace_back(t, c);
      v = std::move(c);
    } else if (v.isList()) {
      auto list = v.toList();
      bool any = false;
      for (size_t j = 0; j < list.size(); j++) {
        c10::IValue e = list.get(j);
        if (!e.isTensor()) continue;
        any = any || is_spyre(e.toTensor());
        note_input(e.toTensor(), arg);
      }
      if (!any) continue;
      auto copy = list.copy();
      for (size_t j = 0; j < copy.size(); j++) {
        c10::IValue e = copy.get(j);
        if (e.isTensor() && is_spyre(e.toTensor())) copy.set(j, convert(e.toTensor()));
      }
      v = c10::IValue(std::move(copy));
    } else if (v.isDevice()) {
      if (v.toDevice().type() != kSpyre) continue;
      c10::Device d = v.toDevice();
      if (!dev) dev = d.has_index() ? d : c10::Device(kSpyre, tl_device);
      v = c10::Device(c10::kCPU);
    } else if (v.isGenerator()) {
      const auto& g = v.toGenerator();
      if (g.device().type() == kSpyre) v = cpu_generator_of(g);
    } else if (v.isNone() && is_generator_type(arg.type())) {
      none_generators.push_back(first + i);
    }
  }
  // A CPU kernel would write the CPU tensor and succeed; PyTorch requires an error (an op's out= and
  // in-place arguments are on the device it runs on), as CUDA gives. CPU scalar inputs stay allowed. A
  // copy is the exception: it writes across devices by definition (sparse copies reach the fallback).
  if (dev && foreign_out && schema.operator_name().name != "aten::copy_") {
    const at::Tensor& t = orig[*foreign_out].toTensor();
    TORCH_CHECK(false, "spyre: ", schema.operator_name(), ": argument '", schema.arguments()[*foreign_out].name(),
                "' is written by the op but is on device ", t.device(), ", not on ", *dev,
                "; out= and in-place tensors must be on the device the op runs on");
  }
  // CUDA's message, which PyTorch's tests match (test_ops.py test_errors: cat, dot, vdot).
  if (any_spyre && foreign_in && !takes_cpu_inputs(schema.operator_name()))
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", *dev,
                " and ", foreign_in->device(), "! (spyre: ", schema.operator_name(), ", argument '", foreign_in_arg,
                "'; move it with .to('", *dev, "'))");
  if (!dev) dev = c10::Device(kSpyre, tl_device);
  if (!dev->has_index()) dev = c10::Device(kSpyre, tl_device);
  for (size_t pos : none_generators) (*stack)[pos] = cpu_generator_of(default_generator(dev->index()));

  cpu_op.callBoxed(stack);

  // The kernel left alias c of spyre tensor t as it was: the same memory and geometry.
  auto unchanged = [&](const at::Tensor& t, const at::Tensor& c) {
    const auto* e = a.holder_of(c);
    return e && e->spyre.unsafeGetStorageImpl() == t.storage().unsafeGetStorageImpl() &&
           c.storage().data() == e->base && c.sizes().equals(t.sizes()) && c.strides().equals(t.strides()) &&
           c.storage_offset() == t.storage_offset();
  };
  a.write_back();
  // An out= argument is written whole: also the elements whose binary16 value the kernel left as it was
  // decoded (a fresh output's stale DLFloat16 bits can decode to the value the kernel writes).
  for (auto& [t, c] : outs16)
    if (unchanged(t, c)) write_dl16(t, c);
  // The spyre tensor for CPU result r: the argument it aliases, a view of device memory, or an upload;
  // a sparse result gets its members mapped so.
  std::function<at::Tensor(const at::Tensor&)> map_result = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined() || r.device().type() != c10::kCPU) return r;
    for (auto& [cpu, t] : a.made)
      if (cpu.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return t;
    if (Aliaser::is_sparse_any(r)) return Aliaser::sparse_like(r, *dev, map_result);
    if (const auto* e = a.holder_of(r)) return view_of(*e, r);
    return upload(r, *dev);
  };
  // A member of a written sparse argument: the spyre member it aliases, brought up to date if the kernel
  // resized it in place (sparse add_ grows the values), or a new one.
  auto member_after = [&](const at::Tensor& r) -> at::Tensor {
    for (auto& [cpu, m] : a.made)
      if (cpu.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) {
        if (!unchanged(m, cpu)) sync_back(a, m, cpu);
        return m;
      }
    return map_result(r);
  };
  for (auto& [t, c] : mutated) {
    if (t.unsafeGetTensorImpl() == nullptr) continue;
    if (t.is_sparse()) {
      auto *d = at::sparse::get_sparse_impl(t), *s = at::sparse::get_sparse_impl(c);
      at::Tensor indices = member_after(s->indices()), values = member_after(s->values());
      d->raw_resize_(s->sparse_dim(), s->dense_dim(), c.sizes());
      d->set_indices_and_values_unsafe(indices, values);
      d->set_coalesced(s->coalesced());
    } else if (at::sparse_csr::is_sparse_compressed(t)) {
      auto* s = at::sparse_csr::get_sparse_csr_impl(c);
      at::sparse_csr::get_sparse_csr_impl(t)->set_member_tensors(member_after(s->compressed_indices()),
                                                                member_after(s->plain_indices()),
                                                                member_after(s->values()), c.sizes());
    } else if (!unchanged(t, c)) {
      sync_back(a, t, c);
    }
  }

  const size_t nret = schema.returns().size();
  const size_t rfirst = stack->size() - nret;
  for (size_t j = 0; j < nret; j++) {
    c10::IValue& v = (*stack)[rfirst + j];
    const auto& ret = schema.returns()[j];
    if (ret.alias_info() && ret.alias_info()->isWrite()) {
      // In-place / out=: return the argument it names (the original spyre tensor).
      bool done = false;
      for (size_t i = 0; i < nargs && !done; i++) {
        const auto& ai = schema.arguments()[i].alias_info();
        if (ai && ai->isWrite() && ai->beforeSets() == ret.alias_info()->beforeSets() && orig[i].isTensor()) {
          v = orig[i];
          done = true;
        }
      }
      if (done) continue;
    }
    if (v.isTensor()) {
      v = map_result(v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& r : list) out.push_back(map_result(r));
      v = std::move(out);
    }
  }
}

void spyre_fallback(const c10::OperatorHandle& op, Stack* stack) {
  count(op);
  run_on_cpu(op, stack);
}

// convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
// output_padding, groups) has the arguments of aten::convolution: run that on the CPU.
void conv_fwd(const c10::OperatorHandle& op, Stack* stack) {
  count(op);
  static auto cpu_op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  run_on_cpu(cpu_op, stack);
}

// convolution_backward_overrideable lacks convolution_backward's bias_sizes (argument 3).
void conv_bwd(const c10::OperatorHandle& op, Stack* stack) {
  count(op);
  static auto cpu_op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  const size_t first = stack->size() - op.schema().arguments().size();
  int64_t channels = (*stack)[first].toTensor().size(1);  // grad_output is N, C_out, ...
  stack->insert(stack->begin() + first + 3, c10::IValue(std::vector<int64_t>{channels}));
  run_on_cpu(cpu_op, stack);
}

// ---------------------------------------------------------------------------------------------
// aten kernels.
c10::DispatchKeySet spyre_ks() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

c10::Device resolve(std::optional<c10::Device> device) {
  c10::Device d = device.value_or(c10::Device(kSpyre));
  TORCH_CHECK(d.type() == kSpyre, "spyre: expected a spyre device, got ", d);
  if (!d.has_index()) return c10::Device(kSpyre, tl_device);
  check_index(d.index());
  return d;
}

at::Tensor spyre_empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                       std::optional<c10::Device> device, std::optional<bool>,
                       std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, "spyre: only strided tensors");
  c10::DeviceGuard g(resolve(device));
  at::Tensor t = at::detail::empty_generic(size, &g_allocator, spyre_ks(), c10::dtype_or_default(dtype), memory_format);
  track_f16_storage(t);
  return t;
}

at::Tensor spyre_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool>) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, "spyre: only strided tensors");
  c10::DeviceGuard g(resolve(device));
  at::Tensor t =
      at::detail::empty_strided_generic(size, stride, &g_allocator, spyre_ks(), c10::dtype_or_default(dtype));
  track_f16_storage(t);
  return t;
}

// A zero tensor has no memory; ATen's ZeroTensor kernels materialise it when needed.
at::Tensor spyre_efficientzerotensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                     std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                     std::optional<bool>) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, "spyre: only strided tensors");
  c10::Device dev = resolve(device);
  static at::native::ZeroTensorAllocator* allocs[SPYRE_MAX_DEVICES] = {};
  if (allocs[dev.index()] == nullptr) allocs[dev.index()] = new at::native::ZeroTensorAllocator(dev);
  return at::detail::empty_generic(size, allocs[dev.index()], spyre_ks() | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor),
                                   c10::dtype_or_default(dtype), std::nullopt);
}

// The CPU aliases carry the math bits, so the CPU copy resolves them (a conjugate or negative view
// materialises here). ATen's Conjugate/Negative fallbacks would instead clone the source first, and
// clone copies through _copy_from again: an endless recursion (a stack overflow) for every device
// whose copies go through _copy_from. So _copy_from falls through those keys to this kernel.
// SPYRE_NUMERICS=dl16 (spyre_triton.numerics): f16 device memory holds DLFloat16's bits, so copies of
// f16 to, from and between cards convert, through f32 (the range beyond binary16's survives a copy to an
// f32 tensor). f16 data meeting f32 on its way between host and card is rounded through DLFloat16.

// Round the f16 or f32 elements of CPU tensor d through DLFloat16, in place.
void round_dl16_(const at::Tensor& d) {
  if (d.numel() == 0) return;
  at::Tensor c = d.is_contiguous() ? d : d.contiguous();
  if (c.scalar_type() == at::kHalf)
    sp_f16_round_dl16_n(static_cast<uint16_t*>(c.data_ptr()), (size_t)c.numel());
  else
    sp_round_dl16_n(c.data_ptr<float>(), (size_t)c.numel());
  if (!c.is_same(d)) d.copy_(c);
}

at::Tensor spyre_copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  if (is_spyre(dst)) dst.storage().mutable_data();  // see own_written_storages
  // A storage's raw bytes (UntypedStorage.cpu(), which torch.save uses) of an f16 tensor's block:
  // DLFloat16's bits in this mode, which no one else reads as the values.
  if (dl16_mode() && is_spyre(self) && !is_spyre(dst) && self.scalar_type() == at::kByte &&
      is_f16_block(self.storage().data()))
    TORCH_WARN_ONCE("spyre: copying the raw bytes of float16 data to the host in dl16 numerics mode: they are "
                    "DLFloat16 bits, which the CPU reads as other values (torch.save stores them so); move "
                    "the tensor with .cpu() or save it in ieee mode to keep its values");
  // (an empty dst takes the plain copy below, which checks the shapes)
  const bool src16 = is_spyre(self) && dl16_f16(self) && dst.numel() > 0;
  const bool dst16 = is_spyre(dst) && dl16_f16(dst) && dst.numel() > 0;
  Aliaser a;
  a.decode = false;
  if (src16 && dst16 && !self.is_neg() && !dst.is_neg()) {
    // DLFloat16 to DLFloat16: the bits, through the aliases, which share a storage where the tensors
    // do, so that an overlapping copy is seen as one
    a.to_cpu(dst).view(at::kShort).copy_(a.to_cpu(self).view(at::kShort));
    return dst;
  }
  if (src16 || dst16) {
    at::Tensor s = src16 ? dl16_values(self) : is_spyre(self) ? a.to_cpu(self) : self;
    if (dst16)
      write_dl16(dst, s);
    else
      (is_spyre(dst) ? a.to_cpu(dst) : dst).copy_(s);
    return dst;
  }
  at::Tensor s = is_spyre(self) ? a.to_cpu(self) : self;
  at::Tensor d = is_spyre(dst) ? a.to_cpu(dst) : dst;
  d.copy_(s);
  if (g_numerics == NUMERICS_DL16 && (s.scalar_type() == at::kHalf || d.scalar_type() == at::kHalf) &&
      (d.scalar_type() == at::kHalf || d.scalar_type() == at::kFloat))
    round_dl16_(d);
  return dst;
}

at::Tensor spyre_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return spyre_copy_from(self, dst, false);
}

const at::Tensor& spyre_resize_(const at::Tensor& self, c10::IntArrayRef size,
                                std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (!self.sizes().equals(size)) impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  size_t need = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(),
                                                 self.storage_offset());
  if (self.numel() > 0 && need > self.storage().nbytes()) {
    resize_bytes(self.storage().unsafeGetStorageImpl(), need);
    track_f16_storage(self);  // a storage that started empty has its first block now
  }
  return self;
}

at::Scalar spyre_local_scalar_dense(const at::Tensor& self) {
  if (dl16_f16(self)) {  // the DLFloat16 value, beyond binary16's range too
    const double v = sp_dl16_to_f32(*static_cast<const uint16_t*>(self.const_data_ptr()));
    return at::Scalar(self.is_neg() ? -v : v);
  }
  Aliaser a;
  return at::_local_scalar_dense(a.to_cpu(self));
}

at::Tensor& spyre_set_storage_offset(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                                     c10::IntArrayRef stride) {
  c10::DeviceGuard g(self.device());
  return at::native::set_storage_cpu_(self, source, offset, size, stride);
}

at::Tensor& spyre_set_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = source.nbytes() / self.dtype().itemsize();
  return spyre_set_storage_offset(self, source, 0, {n}, {});
}

// fill_ / zero_ write device memory in place. Device memory is host memory, so a CPU view of the same
// bytes does it without the host round trip of the fallback (initialisers, optimizer state, masks).
at::Tensor& spyre_fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  if (dl16_f16(self)) {
    TORCH_CHECK(!value.isComplex(), "spyre: fill_ of a float16 tensor with the complex value ", value);
    bits_of(self, true).fill_((int64_t)(int16_t)sp_f32_to_dl16((float)value.toDouble()));
    return self;
  }
  at::from_blob(self.data_ptr(), self.sizes(), self.strides(), self.options().device(at::kCPU)).fill_(value);
  return self;
}

at::Tensor& spyre_fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  return spyre_fill_scalar(self, value.item());
}

at::Tensor& spyre_zero(at::Tensor& self) { return spyre_fill_scalar(self, 0); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(spyre_fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(spyre_fill_tensor));
  m.impl("zero_", TORCH_FN(spyre_zero));
  m.impl("empty.memory_format", TORCH_FN(spyre_empty));
  m.impl("empty_strided", TORCH_FN(spyre_empty_strided));
  m.impl("_efficientzerotensor", TORCH_FN(spyre_efficientzerotensor));
  m.impl("_copy_from", TORCH_FN(spyre_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(spyre_copy_from_and_resize));
  m.impl("resize_", TORCH_FN(spyre_resize_));
  m.impl("_local_scalar_dense", TORCH_FN(spyre_local_scalar_dense));
  m.impl("set_.source_Storage", TORCH_FN(spyre_set_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(spyre_set_storage_offset));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&conv_fwd>());
  m.impl("convolution_backward_overrideable", torch::CppFunction::makeFromBoxedFunction<&conv_bwd>());
  // mode.values is CompositeExplicitAutograd, which would take it before the fallback below, and its
  // kernel refuses every device but CPU, CUDA and XPU. Registered for the device, it runs on the CPU
  // aliases like any other fallback op (aten::mode, the functional form, reaches the fallback already).
  m.impl("mode.values", torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
  // The same for two more CompositeExplicitAutograd kernels: conj_physical_ calls ATen's DispatchStub,
  // which has no kernel for spyre; addr.out (math_addr_out) composes other ops and would write a CPU
  // out= tensor, where the fallback refuses it as CUDA does.
  m.impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
  m.impl("addr.out", torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
  // CompositeImplicitAutograd, and with is_coalesced=True it checks the indices through a DispatchStub that
  // has no spyre kernel; torch.load calls it for each sparse COO tensor it loads while sparse invariant
  // checks are on (torch.sparse.check_sparse_tensor_invariants). (The Python constructor's
  // check_invariants=True calls ATen's validator directly, past the dispatcher: that path still fails.)
  m.impl("_validate_sparse_coo_tensor_args", torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>()); }

// Sparse tensors on spyre: PyTorch's sparse tensors whose index and value tensors are spyre tensors. The
// constructors are ATen's own (the same for every device), run on the device they make the tensor on, as
// ATen's generated device guards do for CUDA; every other op runs on the CPU over aliases of the members,
// as dense ops do (Aliaser::sparse_to_cpu, register_sparse_ops).
at::Tensor spyre_sparse_coo(int64_t sparse_dim, int64_t dense_dim, c10::SymIntArrayRef size, const at::Tensor& indices,
                            const at::Tensor& values, std::optional<at::ScalarType> dtype,
                            std::optional<at::Layout> layout, std::optional<c10::Device> device,
                            std::optional<bool> pin_memory, std::optional<bool> is_coalesced) {
  c10::DeviceGuard g(resolve(device));
  return at::native::new_with_dims_and_tensor_sparse_symint(sparse_dim, dense_dim, size, indices, values, dtype,
                                                            layout, device, pin_memory, is_coalesced);
}
at::Tensor spyre_sparse_coo_empty(int64_t sparse_dim, int64_t dense_dim, c10::IntArrayRef size,
                                  std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                  std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  c10::DeviceGuard g(resolve(device));
  return at::native::new_with_dims_sparse(sparse_dim, dense_dim, size, dtype, layout, device, pin_memory);
}
template <auto empty>
at::Tensor spyre_sparse_empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                              std::optional<at::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard g(resolve(device));
  return empty(size, dtype, layout, device, pin_memory, memory_format);
}
template <auto empty_like>
at::Tensor spyre_sparse_empty_like(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                                   std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                   std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  c10::Device d = device.value_or(self.device());
  c10::OptionalDeviceGuard g;
  if (d.type() == kSpyre) g.reset_device(resolve(d));
  return empty_like(self, dtype, layout, device, pin_memory, memory_format);
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(spyre_sparse_coo));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(spyre_sparse_coo_empty));
  m.impl("empty.memory_format", TORCH_FN(spyre_sparse_empty<at::native::empty_sparse>));
  m.impl("empty_like", TORCH_FN(spyre_sparse_empty_like<at::native::empty_like_sparse_coo>));
}
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(spyre_sparse_empty<at::native::empty_sparse_compressed>));
  m.impl("empty_like", TORCH_FN(spyre_sparse_empty_like<at::native::empty_like_sparse_csr>));
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
}

// Every op with a kernel for CPU sparse tensors runs it for spyre's, on the fallback. Registered per op
// because ATen's composite kernels (written for strided tensors; is_coalesced, values, neg, mm, ...) would
// otherwise take these ops before a backend fallback. Ops with a device argument (pinning, the
// constructors above) keep their own kernels: the fallback reads a device argument as the device to
// compute on. Derived from the dispatcher's table, so it follows the installed torch.
void register_sparse_ops() {
  static bool done = false;
  if (done) return;
  done = true;
  using c10::DispatchKey;
  auto* coo = new torch::Library(torch::Library::IMPL, "aten", DispatchKey::SparsePrivateUse1, __FILE__, __LINE__);
  auto* csr = new torch::Library(torch::Library::IMPL, "aten", DispatchKey::SparseCsrPrivateUse1, __FILE__, __LINE__);
  auto& d = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : d.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = d.findOp(name);
    if (!op || !op->hasSchema()) continue;
    bool device_arg = false;
    for (const auto& arg : op->schema().arguments())
      device_arg = device_arg || arg.type()->kind() == c10::TypeKind::DeviceObjType ||
                   (arg.type()->cast<c10::OptionalType>() &&
                    arg.type()->cast<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::DeviceObjType);
    if (device_arg) continue;
    std::string n = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    for (auto [cpu, ours, lib] : {std::tuple{DispatchKey::SparseCPU, DispatchKey::SparsePrivateUse1, coo},
                                  std::tuple{DispatchKey::SparseCsrCPU, DispatchKey::SparseCsrPrivateUse1, csr}})
      if (op->hasKernelForDispatchKey(cpu) && !op->hasKernelForDispatchKey(ours))
        lib->impl(n.c_str(), torch::CppFunction::makeFromBoxedFunction<&spyre_fallback>());
  }
}

// See spyre_copy_from. Only spyre tensors dispatch here (ATen copies CPU-to-CPU without _copy_from).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace

// torch.autocast("spyre"): the op lists and cast policies CUDA uses.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

namespace at::autocast {  // the op-list macros expect this scope
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define SPYRE_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define SPYRE_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define SPYRE_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define SPYRE_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(SPYRE_LOW)
  AT_FORALL_FP32(SPYRE_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(SPYRE_FP32_OPT)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(SPYRE_PROMOTE)
#undef SPYRE_LOW
#undef SPYRE_FP32
#undef SPYRE_FP32_OPT
#undef SPYRE_PROMOTE
}
}  // namespace at::autocast


namespace spyre_profiler {
void bind(py::module& m);  // profiler.cpp: torch.profiler's PrivateUse1 device track
}

// ---------------------------------------------------------------------------------------------
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "The spyre PyTorch device (PrivateUse1): guard, hooks, allocator, kernels, CPU fallback.";
  if (g_api == nullptr) {
    auto* p = static_cast<const SpyreDevmemAPI*>(PyCapsule_Import(SPYRE_DEVMEM_CAPSULE, 0));
    if (p == nullptr) throw py::error_already_set();
    if (p->version != SPYRE_DEVMEM_API_VERSION) throw std::runtime_error("spyre: devmem API version mismatch");
    g_api = p;
  }
  register_sparse_ops();
  static bool hooks = false;
  if (!hooks) {
    at::RegisterPrivateUse1HooksInterface(new SpyreHooks());
    hooks = true;
  }
  m.def("device_count", [] { return (int)device_count(); });
  m.def("current_device", [] { return (int)tl_device; });
  m.def("set_device", [](int d) { check_index((DeviceIndex)d); tl_device = (DeviceIndex)d; });
  m.def("exchange_device", [](int d) {
    int old = tl_device;
    if (d >= 0) { check_index((DeviceIndex)d); tl_device = (DeviceIndex)d; }
    return old;
  });
  m.def("set_numerics", [](int mode) {
    TORCH_CHECK(mode == NUMERICS_IEEE || mode == NUMERICS_DL16, "spyre: numerics mode ", mode,
                " is not one of isa.NUMERICS_MODES (0..1)");
    int prev = g_numerics;
    if (mode != prev) {  // the f16 data on the cards changes format with the mode
      std::lock_guard<std::mutex> lk(g_f16_mu);
      for (auto& [p, n] : g_f16_blocks)
        convert_f16_words(static_cast<uint16_t*>(const_cast<void*>(p)), n / 2, mode == NUMERICS_DL16);
    }
    g_numerics = mode;
    return prev;
  }, "set_numerics(mode) -> the previous mode (isa.NUMERICS_MODES index): the format of f16 device memory; "
     "switching converts the f16 data on the cards.");
  m.def("copy_from", [](const at::Tensor& src, const at::Tensor& dst) { return spyre_copy_from(src, dst, false); },
        "copy_from(src, dst): the device's aten::_copy_from (converting f16 in DLFloat16 mode).");
  m.def("dl16_values", [](const at::Tensor& t) {
    TORCH_CHECK(is_spyre(t) && t.scalar_type() == at::kHalf, "dl16_values: expected a float16 spyre tensor");
    return dl16_mode() ? dl16_values(t) : Aliaser().to_cpu(t).to(at::kFloat);
  }, "dl16_values(t): the values of float16 spyre tensor t as a new CPU float32 tensor.");
  m.def("write_f16", [](const at::Tensor& dst, const at::Tensor& values) {
    TORCH_CHECK(is_spyre(dst) && dst.scalar_type() == at::kHalf, "write_f16: expected a float16 spyre tensor");
    if (dl16_mode()) write_dl16(dst, values); else spyre_copy_from(values, dst, false);
  }, "write_f16(dst, values): store CPU `values` into float16 spyre tensor dst in the mode's format.");
  m.def("cpu_alias", [](const at::Tensor& t) {
    TORCH_CHECK(is_spyre(t), "cpu_alias: expected a spyre tensor, got one on ", t.device());
    c10::Storage keep = t.storage();  // the alias holds the device memory until it dies
    return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), [keep](void*) {}, t.options().device(at::kCPU));
  }, "A CPU tensor over the same bytes as spyre tensor t (no copy; it keeps t's memory alive).");
  m.def("default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_Wrap(default_generator((DeviceIndex)d)));
  }, "The default torch.Generator of spyre device d (-1: the current device).");
  m.def("fallback_counts", [] {
    py::dict out;
    std::lock_guard<std::mutex> lk(g_count_mu);
    for (auto& [k, v] : g_counts) out[py::str(k)] = v;
    return out;
  }, "How many times each operator (name.overload) ran through the CPU fallback.");
  m.def("record_fallback", [](const std::string& key) {
    std::lock_guard<std::mutex> lk(g_count_mu);
    g_counts[key]++;
  }, "Count a host fallback made from Python (eager_numerics).");
  m.def("reset_fallback_counts", [] {
    std::lock_guard<std::mutex> lk(g_count_mu);
    g_counts.clear();
  });
  spyre_profiler::bind(m);
}
