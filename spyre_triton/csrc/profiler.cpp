// torch.profiler on spyre: a Kineto activity profiler for PrivateUse1 (torch's
// REGISTER_PRIVATEUSE1_PROFILER), so `torch.profiler.profile(activities=[CPU, PrivateUse1])` shows a
// device track of the kernels launched on spyre next to the host events, each as long as the
// performance model says it would run on a card.
//
// The kernels come from Python: while a session records, spyre_triton.device adds a listener to the
// performance model (spyre_triton/perf/capture.py) that hands each modelled launch to record().
// A kernel starts on the device track when its launch starts on the host, or when the card's previous
// kernel ends if that is later, and lasts its modelled time.
#define FMT_HEADER_ONLY  // GenericTraceActivity formats with fmt, whose library torch does not export
#ifndef USE_KINETO
#define USE_KINETO 1  // the torch wheel is built with Kineto; its profiler headers need this
#endif
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>  // CpuTraceBuffer, complete for getTraceBuffer's unique_ptr
#include <output_base.h>
#include <time_since_epoch.h>

#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace py = pybind11;

namespace spyre_profiler {
namespace {

struct Kernel {
  std::string name;
  int device;
  int64_t host_start, host_end, start, end;  // ns since the epoch (Kineto's clock)
  uint64_t correlation;                       // the host op that launched it (0: none known)
  std::string grid;
  double flops, dma_bytes;
};

std::mutex g_mu;
bool g_recording = false;
std::vector<Kernel> g_kernels;        // the recording session's kernels
std::map<int, int64_t> g_device_free;  // per card: when its last kernel ends on the device track
PyObject* g_switch = nullptr;          // Python callable(bool): start or stop feeding record()
thread_local std::vector<uint64_t> tl_correlation;

// Kineto's in-memory logger keeps pointers to the activities it is given, and the trace it builds
// outlives the session (prof.export_chrome_trace after the with-block). So the activities live here,
// a few hundred bytes per kernel launched while a profile recorded.
struct Store {
  libkineto::TraceSpan span;
  std::deque<libkineto::GenericTraceActivity> activities;
  Store(int64_t s, int64_t e) : span(s, e, "spyre") {}
};
std::vector<std::unique_ptr<Store>> g_stores;

int64_t now_ns() { return libkineto::timeSinceEpoch(std::chrono::system_clock::now()); }

void switch_python(bool on) {
  if (g_switch == nullptr || !Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  PyObject* r = PyObject_CallFunctionObjArgs(g_switch, on ? Py_True : Py_False, nullptr);
  if (r == nullptr) {
    PyErr_WriteUnraisable(g_switch);
  } else {
    Py_DECREF(r);
  }
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> lk(g_mu);
      g_kernels.clear();
      g_device_free.clear();
      g_recording = true;
    }
    status_ = libkineto::TraceStatus::RECORDING;
    switch_python(true);
  }
  void stop() override {
    switch_python(false);
    std::lock_guard<std::mutex> lk(g_mu);
    g_recording = false;
    kernels_ = std::move(g_kernels);
    g_kernels.clear();
    status_ = libkineto::TraceStatus::READY;
  }
  std::vector<std::string> errors() override { return {}; }
  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t start, int64_t end) override {
    std::lock_guard<std::mutex> lk(g_mu);
    g_stores.push_back(std::make_unique<Store>(start, end));
    Store& st = *g_stores.back();
    for (const Kernel& k : kernels_) {
      auto& a = st.activities.emplace_back(st.span, libkineto::ActivityType::CONCURRENT_KERNEL, k.name);
      a.startTime = k.start;
      a.endTime = k.end;
      a.device = k.device;
      a.resource = 0;  // the card's one in-order stream
      a.id = (int32_t)k.correlation;
      if (k.correlation != 0 && linked) {
        a.linked = linked((int32_t)k.correlation);
        if (a.linked != nullptr) {
          a.flow.id = (uint32_t)k.correlation;
          a.flow.type = libkineto::kLinkAsyncCpuGpu;
          a.flow.start = 0;
        }
      }
      a.addMetadata("device", k.device);
      a.addMetadata("stream", 0);
      a.addMetadataQuoted("grid", k.grid);
      a.addMetadata("modelled ns", k.end - k.start);
      a.addMetadata("host ns", k.host_end - k.host_start);
      a.addMetadata("flops", (int64_t)k.flops);
      a.addMetadata("dma bytes", (int64_t)k.dma_bytes);
      devices_.insert(k.device);
      logger.handleGenericActivity(a);
    }
  }
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    int d = devices_.empty() ? 0 : *devices_.begin();
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        d, d, "spyre", "spyre:" + std::to_string(d) + " (modelled device time)"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (int d : devices_) out.push_back(libkineto::ResourceInfo{0, 0, d, "stream 0"});
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }
  void pushCorrelationId(uint64_t id) override { tl_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!tl_correlation.empty()) tl_correlation.pop_back();
  }
  std::string getDeviceProperties() override { return ""; }

 private:
  std::vector<Kernel> kernels_;
  std::set<int> devices_;
};

class SpyreActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types, const libkineto::Config& c) override {
    return configure(types, c);
  }

 private:
  std::string name_{"spyre"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

}  // namespace

void bind(py::module& m) {
  m.def("profiler_set_switch", [](py::object fn) {
    Py_XINCREF(fn.ptr());
    g_switch = fn.ptr();  // kept for the life of the process
  }, "The callable(bool) a torch.profiler session calls when it starts (True) and stops (False).");
  m.def("profiler_recording", [] {
    std::lock_guard<std::mutex> lk(g_mu);
    return g_recording;
  }, "Whether a torch.profiler session with the PrivateUse1 activity is recording.");
  m.def("profiler_record", [](const std::string& name, int device, int64_t host_ns, double modelled_ns,
                              const std::string& grid, double flops, double dma_bytes) {
    const int64_t host_end = now_ns();
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_recording) return;
    Kernel k{name, device, host_end - host_ns, host_end, 0, 0,
             tl_correlation.empty() ? 0 : tl_correlation.back(), grid, flops, dma_bytes};
    auto it = g_device_free.find(device);
    k.start = std::max(k.host_start, it == g_device_free.end() ? k.host_start : it->second);
    k.end = k.start + std::max<int64_t>(1, (int64_t)(modelled_ns + 0.5));
    g_device_free[device] = k.end;
    g_kernels.push_back(std::move(k));
  }, "A modelled launch for the recording session's device track: its name, card, host time of the launch "
     "(ns), modelled device time (ns), grid, FLOPs and DMA bytes.");
}

REGISTER_PRIVATEUSE1_PROFILER(SpyreActivityProfiler);

}  // namespace spyre_profiler
