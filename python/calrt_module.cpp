// The `calrt` Python package's native part (`calrt._calrt`): the runtime ABI through the C++
// wrapper (abi/calrt.hpp), as XRT's pyxrt and HailoRT's hailo_platform do for theirs.
//
// Ownership follows the ABI's tree: every object keeps its parent alive (a Buffer its Calbin,
// a Calbin its Device; a mapped array its Buffer), so Python's collector can release them in
// any order and a child is always destroyed before its parent. A failed call raises
// calrt.Error carrying the code, its name and the fault class (request, model, device).
// The runtime is any table: the simulator's library, the service client's, or a vendor's;
// calrt/__init__.py finds the libraries and passes a path.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_loader.hpp"

namespace py = pybind11;

namespace {

// A loaded runtime: its table stays valid while any object made from it lives.
struct Runtime {
  calrt::Api api;
  std::string origin;
};

struct PyDevice {
  std::shared_ptr<Runtime> runtime;
  calrt::Device device;
};

struct PyCalbin {
  calrt::Calbin calbin;
};

struct PyBuffer {
  calrt::Buffer buffer;
  std::string model;
  calrt::Direction direction;
  std::vector<calrt::TensorDesc> tensors;
};

struct PyJob {
  calrt::Job job;
};

struct PyKv {
  calrt::Kv kv;
};

calrt::Timeout timeout_of(std::optional<double> ms) {
  if (!ms) return calrt::kInfiniteTimeout;
  if (!(*ms >= 0.0)) {
    throw calrt::Error(CALRT_INVALID_ARGUMENT, "calrt", "timeout_ms must be >= 0 or None");
  }
  return std::chrono::duration_cast<calrt::Timeout>(std::chrono::duration<double, std::milli>(*ms));
}

calrt::Direction direction_of(const std::string& text) {
  if (text == "input") return calrt::Direction::input;
  if (text == "output") return calrt::Direction::output;
  throw calrt::Error(CALRT_INVALID_ARGUMENT, "calrt",
                     "direction '" + text + "': expected 'input' or 'output'");
}

calrt::DeviceKind kind_of(const std::string& text) {
  if (text == "sim") return calrt::DeviceKind::sim;
  if (text == "pcie") return calrt::DeviceKind::pcie;
  throw calrt::Error(CALRT_INVALID_ARGUMENT, "calrt",
                     "device kind '" + text + "': expected 'sim' or 'pcie'");
}

// The wrapper's names are the ABI's enum spellings ("COMPLETED", "BF16"); Python gets them in
// lower case, as its strings usually are.
template <class E>
std::string name_of(E value) {
  std::string text = calrt::to_string(value);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The NumPy element type a tensor is mapped as: BF16 has none, so its raw 16-bit words come
// as uint16 (calrt.bf16_to_float32 widens them); INT4 comes as packed bytes.
py::dtype numpy_dtype(calrt::Dtype dtype) {
  switch (dtype) {
    case calrt::Dtype::int8:
    case calrt::Dtype::int4:
      return py::dtype::of<int8_t>();
    case calrt::Dtype::int32:
      return py::dtype::of<int32_t>();
    case calrt::Dtype::bf16:
      return py::dtype::of<uint16_t>();
    case calrt::Dtype::f16:
      return py::dtype("float16");
    case calrt::Dtype::f32:
      return py::dtype::of<float>();
    case calrt::Dtype::count_:
      break;
  }
  throw calrt::Error(CALRT_INTERNAL, "calrt", "tensor dtype out of range");
}

py::dict tensor_dict(const calrt::TensorDesc& t) {
  py::dict d;
  d["name"] = t.name;
  d["index"] = t.index;
  d["role"] = name_of(t.role);
  d["dtype"] = name_of(t.dtype);
  d["shape"] = t.shape;
  d["layout"] = name_of(t.layout);
  d["tile_d0"] = t.tile_d0;
  d["bytes"] = t.bytes;
  return d;
}

py::dict model_dict(const calrt::ModelDesc& m) {
  py::dict d;
  d["name"] = m.name;
  d["type"] = name_of(m.type);
  d["index"] = m.index;
  py::list inputs, outputs, csrs;
  for (const auto& t : m.inputs) inputs.append(tensor_dict(t));
  for (const auto& t : m.outputs) outputs.append(tensor_dict(t));
  for (const auto& c : m.csrs) {
    py::dict csr;
    csr["name"] = c.name;
    csr["index"] = c.index;
    csrs.append(csr);
  }
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["csrs"] = csrs;
  return d;
}

double ns_to_ms(std::chrono::nanoseconds t) { return static_cast<double>(t.count()) / 1e6; }

}  // namespace

PYBIND11_MODULE(_calrt, m) {
  m.doc() = "The Calculet runtime ABI (calrt.h) from Python; see python/README.md";
  m.attr("ABI_VERSION") = py::make_tuple(CALRT_ABI_MAJOR, CALRT_ABI_MINOR, CALRT_ABI_PATCH);

  // calrt.Error(code, code_name, fault_class, function, message): built in Python
  // (__init__.py) so that it is an ordinary exception class with attributes.
  static py::object error_class = py::none();
  m.def("_set_error_class", [](py::object cls) { error_class = std::move(cls); });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const calrt::Error& e) {
      if (error_class.is_none()) throw;
      py::object error = error_class(static_cast<int>(e.code()), calrt::code_name(e.code()),
                                     calrt::to_string(e.fault_class()), e.function(), e.message());
      PyErr_SetObject(error_class.ptr(), error.ptr());
    } catch (const calrt::LoadError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });

  py::class_<Runtime, std::shared_ptr<Runtime>>(m, "Runtime")
      .def_readonly("origin", &Runtime::origin)
      .def("__repr__", [](const Runtime& r) { return "<calrt.Runtime " + r.origin + ">"; });
  m.def(
      "load_runtime",
      [](const std::string& path) {
        auto runtime = std::make_shared<Runtime>();
        runtime->api = calrt::load_runtime(path);
        runtime->origin = path;
        return runtime;
      },
      py::arg("path"), "Loads a runtime library (CalrtGetApi) by path.");

  py::class_<PyDevice>(m, "Device")
      .def(py::init([](std::shared_ptr<Runtime> runtime, const std::string& kind, uint32_t index,
                       const std::string& config, std::optional<double> timeout_ms) {
             auto d = std::make_unique<PyDevice>();
             d->device = calrt::Device::create(runtime->api, kind_of(kind), index, config,
                                               timeout_of(timeout_ms));
             d->runtime = std::move(runtime);
             return d;
           }),
           py::arg("runtime"), py::arg("kind") = "sim", py::arg("index") = 0,
           py::arg("config") = "", py::arg("timeout_ms") = 30000.0)
      .def("status",
           [](const PyDevice& d) {
             const calrt::DeviceStatus s = d.device.status();
             py::dict out;
             out["state"] = name_of(s.state);
             out["device_name"] = s.device_name;
             out["runtime_version"] = s.runtime_version;
             out["firmware_version"] = s.firmware_version;
             out["driver_version"] = s.driver_version;
             out["abi"] = py::make_tuple(s.abi_major, s.abi_minor, s.abi_patch);
             out["chip_count"] = s.chip_count;
             out["error_count"] = s.error_count;
             out["reset_count"] = s.reset_count;
             out["device_time_ms"] = ns_to_ms(s.device_time);
             out["last_error"] = calrt::code_name(s.last_error);
             return out;
           })
      .def(
          "load_calbin",
          [](PyDevice& d, const std::filesystem::path& path) {
            return std::make_unique<PyCalbin>(PyCalbin{calrt::Calbin::create(d.device, path)});
          },
          py::arg("path"), py::keep_alive<0, 1>(),
          "Calbin_Create on a calbin directory; configure() puts it on the device.")
      .def(
          "close", [](PyDevice& d) { d.device.destroy(); },
          "Device_Destroy now; the calbins, buffers and jobs made from it become invalid.");

  py::class_<PyCalbin>(m, "Calbin")
      .def(
          "configure",
          [](PyCalbin& c, std::optional<double> timeout_ms) {
            const calrt::ConfigureResult r = c.calbin.configure(timeout_of(timeout_ms));
            py::dict out;
            out["configure_time_ms"] = ns_to_ms(r.configure_time);
            out["memory_used_bytes"] = r.memory_used_bytes;
            return out;
          },
          py::arg("timeout_ms") = 30000.0)
      .def("info",
           [](const PyCalbin& c) {
             const calrt::CalbinInfo i = c.calbin.info();
             py::dict out;
             out["calbin_version"] = i.calbin_version;
             out["architecture"] = i.architecture;
             out["chip_count"] = i.chip_count;
             out["vocab"] = i.vocab;
             out["context"] = i.context;
             out["batch"] = i.batch;
             out["layers"] = i.layers;
             out["hidden"] = i.hidden;
             out["prefill_chunk"] = i.prefill_chunk;
             out["kv_dtype"] = name_of(i.kv_dtype);
             out["configured"] = i.configured;
             return out;
           })
      .def("models",
           [](const PyCalbin& c) {
             py::list out;
             for (const calrt::ModelDesc& model : c.calbin.models()) out.append(model_dict(model));
             return out;
           })
      .def(
          "buffer",
          [](PyCalbin& c, const std::string& model, const std::string& direction) {
            const calrt::Direction dir = direction_of(direction);
            auto b = std::make_unique<PyBuffer>();
            b->buffer = calrt::Buffer::create(c.calbin, model, dir);
            b->model = model;
            b->direction = dir;
            for (const calrt::ModelDesc& desc : c.calbin.models()) {
              if (desc.name == model) {
                b->tensors = dir == calrt::Direction::input ? desc.inputs : desc.outputs;
              }
            }
            return b;
          },
          py::arg("model"), py::arg("direction"), py::keep_alive<0, 1>())
      .def(
          "submit",
          [](PyCalbin& c, const std::string& model, const PyBuffer& input, const PyBuffer& output) {
            return std::make_unique<PyJob>(
                PyJob{calrt::Job::submit(c.calbin, model, input.buffer, output.buffer)});
          },
          py::arg("model"), py::arg("input"), py::arg("output"), py::keep_alive<0, 1>(),
          py::keep_alive<0, 3>(), py::keep_alive<0, 4>())
      .def(
          "allocate_kv",
          [](PyCalbin& c, uint32_t tokens) {
            return std::make_unique<PyKv>(PyKv{calrt::Kv::allocate(c.calbin, tokens)});
          },
          py::arg("tokens"), py::keep_alive<0, 1>())
      .def("kv_capacity", [](const PyCalbin& c) {
        const calrt::KvCapacity k = c.calbin.kv_capacity();
        py::dict out;
        out["total_tokens"] = k.total_tokens;
        out["free_tokens"] = k.free_tokens;
        out["largest_free_tokens"] = k.largest_free_tokens;
        out["bytes_per_token_per_chip"] = k.bytes_per_token_per_chip;
        out["live_handles"] = k.live_handles;
        return out;
      });

  py::class_<PyBuffer>(m, "Buffer")
      .def_readonly("model", &PyBuffer::model)
      .def_property_readonly("tensors",
                             [](const PyBuffer& b) {
                               py::list out;
                               for (const auto& t : b.tensors) out.append(tensor_dict(t));
                               return out;
                             })
      .def(
          "map",
          [](py::object self, uint32_t tensor, std::optional<double> timeout_ms) {
            PyBuffer& b = self.cast<PyBuffer&>();
            if (tensor >= b.tensors.size()) {
              throw calrt::Error(CALRT_OUT_OF_RANGE, "Buffer_Map",
                                 "tensor " + std::to_string(tensor) + " of a buffer with " +
                                     std::to_string(b.tensors.size()));
            }
            const py::dtype dtype = numpy_dtype(b.tensors[tensor].dtype);
            auto mapping =
                std::make_unique<calrt::Mapping>(b.buffer.map(tensor, timeout_of(timeout_ms)));
            const auto itemsize = static_cast<uint64_t>(dtype.itemsize());
            const auto count = static_cast<py::ssize_t>(mapping->size() / itemsize);
            void* data = mapping->bytes().data();
            // Zero-copy: the array's base owns the mapping (unmapped when the array goes) and
            // the buffer (kept alive while the array is).
            py::capsule owner(mapping.release(), [](void* p) {
              delete static_cast<calrt::Mapping*>(p);  // Buffer_Unmap
            });
            py::tuple base = py::make_tuple(owner, self);
            return py::array(dtype, {count}, {static_cast<py::ssize_t>(itemsize)}, data,
                             py::capsule(new py::object(base), [](void* p) {
                               py::gil_scoped_acquire gil;
                               delete static_cast<py::object*>(p);
                             }));
          },
          py::arg("tensor"), py::arg("timeout_ms") = 30000.0,
          "Maps one tensor: a 1-D NumPy view of its bytes (BF16 as uint16), valid while the "
          "array lives; writes go to the device's buffer.")
      .def(
          "set_csr",
          [](PyBuffer& b, uint32_t csr, uint64_t value) { b.buffer.set_csr(csr, value); },
          py::arg("csr"), py::arg("value"))
      .def(
          "csr", [](const PyBuffer& b, uint32_t csr) { return b.buffer.csr(csr); }, py::arg("csr"))
      .def("destroy", [](PyBuffer& b) { b.buffer.destroy(); });

  py::class_<PyJob>(m, "Job")
      .def(
          "wait",
          [](PyJob& j, std::optional<double> timeout_ms) {
            const calrt::Timeout timeout = timeout_of(timeout_ms);
            calrt::WaitResult result;
            {
              py::gil_scoped_release release;  // another Python thread may cancel it
              result = j.job.wait(timeout);
            }
            if (result != calrt::WaitResult::ready) return "not_ready";
            // A job the device failed (or timed out) is an error, not a "ready" whose output
            // holds zeros: it raises with the job's own code, fault class and message. A job
            // the host cancelled ended as asked: "ready", and status() says cancelled.
            const calrt::JobStatus s = j.job.status();
            if (s.state == calrt::JobState::failed || s.state == calrt::JobState::timed_out) {
              throw calrt::Error(
                  s.code, "Job_Wait",
                  std::string("the job ended ") + name_of(s.state) + ": " + s.message);
            }
            return "ready";
          },
          py::arg("timeout_ms") = 30000.0)
      .def("status",
           [](const PyJob& j) {
             const calrt::JobStatus s = j.job.status();
             py::dict out;
             out["state"] = name_of(s.state);
             out["code"] = calrt::code_name(s.code);
             out["fault_class"] = s.code == CALRT_OK ? py::object(py::none())
                                                     : py::str(calrt::to_string(s.fault_class()));
             out["message"] = s.message;
             out["submit_time_ms"] = ns_to_ms(s.submit_time);
             out["start_time_ms"] = ns_to_ms(s.start_time);
             out["end_time_ms"] = ns_to_ms(s.end_time);
             return out;
           })
      .def("cancel", [](PyJob& j) { j.job.cancel(); })
      .def("destroy", [](PyJob& j) { j.job.destroy(); });

  py::class_<PyKv>(m, "Kv")
      .def(
          "apply",
          [](const PyKv& k, const PyBuffer& input, uint32_t row) { k.kv.apply(input.buffer, row); },
          py::arg("input"), py::arg("row") = 0)
      .def("clear", [](PyKv& k) { k.kv.clear(); })
      .def("info",
           [](const PyKv& k) {
             const calrt::KvInfo i = k.kv.info();
             py::dict out;
             out["capacity_tokens"] = i.capacity_tokens;
             out["filled_tokens"] = i.filled_tokens;
             return out;
           })
      .def("free", [](PyKv& k) { k.kv.free(); });
}
