// kf_sycl_shim: the C ABI of kf_sycl_shim.h over the DPC++ SYCL runtime (intel-sycl-rt).
//
// Built by build.rs with the system C++ compiler (no SYCL compiler needed: this file holds no
// device code; kernels are compiled at run time by the runtime's own compiler, libsycl-jit).
// Rules: no exception crosses the C boundary; every failure is a KFS_* code plus a message.

#define SYCL_DISABLE_FSYCL_SYCLHPP_WARNING 1
#include <sycl/sycl.hpp>
#include <sycl/ext/oneapi/experimental/syclbin_kernel_bundle.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "kf_sycl_shim.h"

namespace syclex = sycl::ext::oneapi::experimental;
using exe_bundle = sycl::kernel_bundle<sycl::bundle_state::executable>;

struct kfs_queue {
    sycl::device dev;
    sycl::context ctx;
    sycl::queue q;
    std::shared_ptr<std::mutex> async_lock;
    std::shared_ptr<std::vector<std::string>> async_errors;
};

struct kfs_program {
    exe_bundle bundle;
    sycl::kernel kernel;
    std::string entry;
    long num_args; // -1 when the runtime does not say
};

namespace {

char* dup_string(const std::string& s) {
    char* p = static_cast<char*>(std::malloc(s.size() + 1));
    if (p != nullptr) {
        std::memcpy(p, s.data(), s.size());
        p[s.size()] = '\0';
    }
    return p;
}

int fail(char** err, int code, const std::string& message) {
    if (err != nullptr) {
        *err = dup_string(message);
    }
    return code;
}

// The KFS code of a SYCL exception thrown while doing `what` (compile / launch / other).
int code_of(const sycl::exception& e, int default_code) {
    const std::error_code& c = e.code();
    if (c == sycl::errc::memory_allocation) {
        return KFS_RESOURCES;
    }
    if (c == sycl::errc::build) {
        return KFS_COMPILE;
    }
    return default_code;
}

// Runs `body`, turning any exception into a code and message.
template <typename F>
int guarded(char** err, int default_code, const char* what, F&& body) {
    try {
        return body();
    } catch (const sycl::exception& e) {
        std::string msg = e.what();
        if (default_code != KFS_COMPILE) {
            msg = std::string(what) + ": " + msg + " (sycl::errc " +
                  std::to_string(e.code().value()) + ")";
        }
        return fail(err, code_of(e, default_code), msg);
    } catch (const std::bad_alloc&) {
        return fail(err, KFS_RESOURCES, std::string(what) + ": out of host memory");
    } catch (const std::exception& e) {
        return fail(err, default_code, std::string(what) + ": " + e.what());
    } catch (...) {
        return fail(err, default_code, std::string(what) + ": unknown C++ exception");
    }
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

// Appends `"key": value` (value already JSON) to an object under construction.
struct JsonObject {
    std::ostringstream s;
    bool first = true;
    JsonObject() { s << "{"; }
    void raw(const char* key, const std::string& value) {
        s << (first ? "" : ",") << json_string(key) << ":" << value;
        first = false;
    }
    void str(const char* key, const std::string& value) { raw(key, json_string(value)); }
    template <typename T> void num(const char* key, T value) { raw(key, std::to_string(value)); }
    void boolean(const char* key, bool value) { raw(key, value ? "true" : "false"); }
    std::string done() {
        s << "}";
        return s.str();
    }
};

// Evaluates `get` and records it with `put`, skipping queries the runtime refuses.
template <typename Get, typename Put> void try_info(Get&& get, Put&& put) {
    try {
        put(get());
    } catch (...) {
    }
}

const char* type_name(sycl::info::device_type t) {
    switch (t) {
    case sycl::info::device_type::gpu: return "gpu";
    case sycl::info::device_type::cpu: return "cpu";
    case sycl::info::device_type::accelerator: return "accelerator";
    default: return "other";
    }
}

const char* backend_name(sycl::backend b) {
    switch (b) {
    case sycl::backend::opencl: return "opencl";
    case sycl::backend::ext_oneapi_level_zero: return "level_zero";
    case sycl::backend::ext_oneapi_cuda: return "cuda";
    case sycl::backend::ext_oneapi_hip: return "hip";
    case sycl::backend::ext_oneapi_native_cpu: return "native_cpu";
    default: return "other";
    }
}

std::vector<sycl::device> all_devices() {
    std::vector<sycl::device> out;
    for (const sycl::platform& p : sycl::platform::get_platforms()) {
        for (const sycl::device& d : p.get_devices()) {
            out.push_back(d);
        }
    }
    return out;
}

std::string device_json(const sycl::device& d, size_t platform_index, size_t device_index) {
    namespace di = sycl::info::device;
    JsonObject o;
    o.num("platform_index", platform_index);
    o.num("device_index", device_index);
    sycl::platform p = d.get_platform();
    o.str("platform", p.get_info<sycl::info::platform::name>());
    try_info([&] { return p.get_info<sycl::info::platform::version>(); },
             [&](const std::string& v) { o.str("platform_version", v); });
    o.str("backend", backend_name(d.get_backend()));
    o.str("name", d.get_info<di::name>());
    try_info([&] { return d.get_info<di::vendor>(); }, [&](const std::string& v) { o.str("vendor", v); });
    try_info([&] { return d.get_info<di::driver_version>(); },
             [&](const std::string& v) { o.str("driver_version", v); });
    try_info([&] { return d.get_info<di::version>(); }, [&](const std::string& v) { o.str("version", v); });
    try_info([&] { return d.get_info<di::device_type>(); },
             [&](sycl::info::device_type t) { o.str("type", type_name(t)); });
    try_info([&] { return d.get_info<di::max_compute_units>(); },
             [&](uint32_t v) { o.num("compute_units", v); });
    try_info([&] { return d.get_info<di::max_work_group_size>(); },
             [&](size_t v) { o.num("max_work_group_size", v); });
    try_info([&] { return d.get_info<di::max_work_item_sizes<3>>(); },
             [&](sycl::range<3> r) {
                 // SYCL lists the sizes of a 3-D range; dimension 2 is the fastest-moving.
                 o.raw("max_work_item_sizes", "[" + std::to_string(r[0]) + "," +
                                                  std::to_string(r[1]) + "," +
                                                  std::to_string(r[2]) + "]");
             });
    try_info([&] { return d.get_info<di::local_mem_size>(); },
             [&](uint64_t v) { o.num("local_mem_bytes", v); });
    try_info([&] { return d.get_info<di::global_mem_size>(); },
             [&](uint64_t v) { o.num("global_mem_bytes", v); });
    try_info([&] { return d.get_info<di::max_clock_frequency>(); },
             [&](uint32_t v) { o.num("max_clock_mhz", v); });
    try_info([&] { return d.get_info<di::preferred_vector_width_float>(); },
             [&](uint32_t v) { o.num("preferred_vector_width_float", v); });
    try_info([&] { return d.get_info<di::native_vector_width_float>(); },
             [&](uint32_t v) { o.num("native_vector_width_float", v); });
    try_info([&] { return d.get_info<di::mem_base_addr_align>(); },
             [&](uint32_t v) { o.num("mem_base_addr_align_bits", v); });
    try_info([&] { return d.get_info<di::max_mem_alloc_size>(); },
             [&](uint64_t v) { o.num("max_mem_alloc_bytes", v); });
    try_info([&] { return d.get_info<di::global_mem_cache_size>(); },
             [&](uint64_t v) { o.num("global_mem_cache_bytes", v); });
    try_info([&] { return d.get_info<di::global_mem_cache_line_size>(); },
             [&](uint32_t v) { o.num("global_mem_cacheline_bytes", v); });
    try_info([&] { return d.get_info<di::sub_group_sizes>(); },
             [&](const std::vector<size_t>& v) {
                 std::string a = "[";
                 for (size_t i = 0; i < v.size(); ++i) {
                     a += (i ? "," : "") + std::to_string(v[i]);
                 }
                 o.raw("sub_group_sizes", a + "]");
             });
    o.boolean("fp16", d.has(sycl::aspect::fp16));
    o.boolean("fp64", d.has(sycl::aspect::fp64));
    o.boolean("usm_device_allocations", d.has(sycl::aspect::usm_device_allocations));
    bool can_build = false;
    try {
        sycl::device copy = d; // ext_oneapi_can_build is not const
        can_build = copy.ext_oneapi_can_build(syclex::source_language::sycl);
    } catch (...) {
    }
    o.boolean("can_build_sycl", can_build);
    return o.done();
}

template <int N> sycl::range<N> to_range(const size_t* v) {
    if constexpr (N == 1) {
        return sycl::range<1>(v[0]);
    } else if constexpr (N == 2) {
        return sycl::range<2>(v[0], v[1]);
    } else {
        return sycl::range<3>(v[0], v[1], v[2]);
    }
}

template <int N>
void submit_nd(sycl::handler& h, const sycl::kernel& k, const size_t* global, const size_t* local) {
    h.parallel_for(sycl::nd_range<N>(to_range<N>(global), to_range<N>(local)), k);
}

std::string drain_async(kfs_queue* q) {
    std::lock_guard<std::mutex> lock(*q->async_lock);
    std::string all;
    for (const std::string& e : *q->async_errors) {
        all += (all.empty() ? "" : "; ") + e;
    }
    q->async_errors->clear();
    return all;
}

} // namespace

extern "C" {

int kfs_abi_version(void) { return KFS_ABI_VERSION; }

void kfs_free(void* p) { std::free(p); }

int kfs_runtime_version(char** out, char** err) {
    return guarded(err, KFS_OTHER, "kfs_runtime_version", [&] {
        std::string v = "libsycl " + std::to_string(__LIBSYCL_MAJOR_VERSION) + "." +
                        std::to_string(__LIBSYCL_MINOR_VERSION) + "." +
                        std::to_string(__LIBSYCL_PATCH_VERSION) + " (" +
                        std::to_string(__SYCL_COMPILER_VERSION) + ")";
        *out = dup_string(v);
        return KFS_OK;
    });
}

int kfs_list_devices(char** json, char** err) {
    return guarded(err, KFS_UNAVAILABLE, "listing SYCL devices", [&] {
        std::string a = "[";
        size_t pi = 0;
        bool first = true;
        for (const sycl::platform& p : sycl::platform::get_platforms()) {
            size_t di = 0;
            for (const sycl::device& d : p.get_devices()) {
                a += (first ? "" : ",") + device_json(d, pi, di);
                first = false;
                ++di;
            }
            ++pi;
        }
        *json = dup_string(a + "]");
        return KFS_OK;
    });
}

int kfs_open(size_t index, kfs_queue** out, char** err) {
    return guarded(err, KFS_UNAVAILABLE, "opening the SYCL device", [&] {
        std::vector<sycl::device> devices = all_devices();
        if (index >= devices.size()) {
            return fail(err, KFS_UNAVAILABLE,
                        "no SYCL device number " + std::to_string(index) + " (" +
                            std::to_string(devices.size()) + " present)");
        }
        auto lock = std::make_shared<std::mutex>();
        auto errors = std::make_shared<std::vector<std::string>>();
        auto handler = [lock, errors](sycl::exception_list list) {
            for (const std::exception_ptr& e : list) {
                std::string text;
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    text = ex.what();
                } catch (...) {
                    text = "unknown asynchronous error";
                }
                std::lock_guard<std::mutex> g(*lock);
                errors->push_back(text);
            }
        };
        sycl::device dev = devices[index];
        sycl::context ctx(dev, handler);
        sycl::queue q(ctx, dev, handler,
                      sycl::property_list{sycl::property::queue::enable_profiling{},
                                          sycl::property::queue::in_order{}});
        *out = new kfs_queue{dev, ctx, q, lock, errors};
        return KFS_OK;
    });
}

void kfs_close(kfs_queue* q) {
    if (q == nullptr) {
        return;
    }
    try {
        q->q.wait();
    } catch (...) {
    }
    delete q;
}

int kfs_build(kfs_queue* q, const char* src, size_t src_len, const char* include_name,
              const char* include_text, const char* const* opts, size_t nopts,
              const char* entry, int register_name, kfs_program** out, char** log, char** err) {
    return guarded(err, KFS_COMPILE, "building SYCL source", [&] {
        std::vector<std::string> options;
        for (size_t i = 0; i < nopts; ++i) {
            options.emplace_back(opts[i]);
        }
        std::string name(entry);
        std::string build_log;
        std::string text(src, src_len);
        auto source =
            include_name != nullptr && include_text != nullptr
                ? syclex::create_kernel_bundle_from_source(
                      q->ctx, syclex::source_language::sycl, text,
                      syclex::properties{syclex::include_files{include_name, include_text}})
                : syclex::create_kernel_bundle_from_source(q->ctx, syclex::source_language::sycl,
                                                           text);
        std::vector<sycl::device> devs{q->dev};
        exe_bundle bundle =
            register_name != 0
                ? syclex::build(source, devs,
                                syclex::properties{syclex::build_options{options},
                                                   syclex::save_log{&build_log},
                                                   syclex::registered_names{name}})
                : syclex::build(source, devs,
                                syclex::properties{syclex::build_options{options},
                                                   syclex::save_log{&build_log}});
        *log = dup_string(build_log);
        if (!bundle.ext_oneapi_has_kernel(name)) {
            return fail(err, KFS_COMPILE, "no kernel named `" + name + "` in the built bundle");
        }
        sycl::kernel kernel = bundle.ext_oneapi_get_kernel(name);
        long num_args = -1;
        try {
            num_args = static_cast<long>(kernel.get_info<sycl::info::kernel::num_args>());
        } catch (...) {
        }
        *out = new kfs_program{bundle, kernel, name, num_args};
        return KFS_OK;
    });
}

int kfs_program_content(kfs_program* p, void** data, size_t* len, char** err) {
    return guarded(err, KFS_OTHER, "serialising the kernel bundle", [&] {
        std::vector<char> bytes = p->bundle.ext_oneapi_get_content();
        void* buf = std::malloc(bytes.empty() ? 1 : bytes.size());
        if (buf == nullptr) {
            return fail(err, KFS_RESOURCES, "out of host memory");
        }
        std::memcpy(buf, bytes.data(), bytes.size());
        *data = buf;
        *len = bytes.size();
        return KFS_OK;
    });
}

int kfs_load(kfs_queue* q, const void* data, size_t len, const char* entry, kfs_program** out,
             char** err) {
    return guarded(err, KFS_OTHER, "loading a cached kernel bundle", [&] {
        std::vector<char> bytes(static_cast<const char*>(data),
                                static_cast<const char*>(data) + len);
        exe_bundle bundle = syclex::get_kernel_bundle<sycl::bundle_state::executable>(
            q->ctx, std::vector<sycl::device>{q->dev}, sycl::span<char>(bytes.data(), bytes.size()));
        std::string name(entry);
        if (!bundle.ext_oneapi_has_kernel(name)) {
            return fail(err, KFS_OTHER, "the cached bundle has no kernel `" + name + "`");
        }
        sycl::kernel kernel = bundle.ext_oneapi_get_kernel(name);
        *out = new kfs_program{bundle, kernel, name, -1};
        return KFS_OK;
    });
}

int kfs_program_info(kfs_queue* q, kfs_program* p, char** json, char** err) {
    return guarded(err, KFS_OTHER, "querying kernel facts", [&] {
        namespace ki = sycl::info::kernel_device_specific;
        JsonObject o;
        if (p->num_args >= 0) {
            o.num("num_args", p->num_args);
        }
        const sycl::kernel& k = p->kernel;
        const sycl::device& d = q->dev;
        try_info([&] { return k.get_info<ki::work_group_size>(d); },
                 [&](size_t v) { o.num("work_group_size", v); });
        try_info([&] { return k.get_info<ki::private_mem_size>(d); },
                 [&](uint64_t v) { o.num("private_mem_size", v); });
        try_info([&] { return k.get_info<ki::preferred_work_group_size_multiple>(d); },
                 [&](size_t v) { o.num("preferred_work_group_size_multiple", v); });
        try_info([&] { return k.get_info<ki::max_sub_group_size>(d); },
                 [&](uint32_t v) { o.num("max_sub_group_size", v); });
        try_info([&] { return k.get_info<ki::compile_sub_group_size>(d); },
                 [&](uint32_t v) { o.num("compile_sub_group_size", v); });
        *json = dup_string(o.done());
        return KFS_OK;
    });
}

void kfs_program_free(kfs_program* p) { delete p; }

int kfs_malloc(kfs_queue* q, size_t bytes, void** out, char** err) {
    return guarded(err, KFS_RESOURCES, "sycl::malloc_device", [&] {
        void* p = sycl::malloc_device(bytes, q->q);
        if (p == nullptr) {
            return fail(err, KFS_RESOURCES,
                        "sycl::malloc_device of " + std::to_string(bytes) + " bytes failed");
        }
        *out = p;
        return KFS_OK;
    });
}

void kfs_free_device(kfs_queue* q, void* ptr) {
    if (q == nullptr || ptr == nullptr) {
        return;
    }
    try {
        sycl::free(ptr, q->q);
    } catch (...) {
    }
}

int kfs_memcpy(kfs_queue* q, void* dst, const void* src, size_t bytes, char** err) {
    return guarded(err, KFS_OTHER, "queue::memcpy", [&] {
        q->q.memcpy(dst, src, bytes).wait_and_throw();
        std::string async = drain_async(q);
        if (!async.empty()) {
            return fail(err, KFS_OTHER, "queue::memcpy: " + async);
        }
        return KFS_OK;
    });
}

int kfs_fill_u32(kfs_queue* q, void* dst, uint32_t value, size_t count, char** err) {
    return guarded(err, KFS_OTHER, "queue::fill", [&] {
        q->q.fill(static_cast<uint32_t*>(dst), value, count).wait_and_throw();
        std::string async = drain_async(q);
        if (!async.empty()) {
            return fail(err, KFS_OTHER, "queue::fill: " + async);
        }
        return KFS_OK;
    });
}

int kfs_launch(kfs_queue* q, kfs_program* p, const kfs_arg* args, size_t nargs, uint32_t dims,
               const size_t* global, const size_t* local, uint64_t* nanoseconds, char** err) {
    return guarded(err, KFS_LAUNCH, "launching the kernel", [&] {
        if (dims < 1 || dims > 3) {
            return fail(err, KFS_LAUNCH, std::to_string(dims) + " dimensions (expected 1 to 3)");
        }
        drain_async(q);
        sycl::event ev = q->q.submit([&](sycl::handler& h) {
            for (size_t i = 0; i < nargs; ++i) {
                const kfs_arg& a = args[i];
                const int index = static_cast<int>(i);
                switch (a.kind) {
                case KFS_ARG_PTR:
                    h.set_arg(index, reinterpret_cast<void*>(static_cast<uintptr_t>(a.value)));
                    break;
                case KFS_ARG_I32:
                    h.set_arg(index, static_cast<int32_t>(static_cast<uint32_t>(a.value)));
                    break;
                case KFS_ARG_U32: h.set_arg(index, static_cast<uint32_t>(a.value)); break;
                case KFS_ARG_I64: h.set_arg(index, static_cast<int64_t>(a.value)); break;
                case KFS_ARG_F32: {
                    uint32_t bits = static_cast<uint32_t>(a.value);
                    float f;
                    std::memcpy(&f, &bits, sizeof f);
                    h.set_arg(index, f);
                    break;
                }
                case KFS_ARG_LOCAL:
                    h.set_arg(index, sycl::local_accessor<char, 1>(
                                         sycl::range<1>(static_cast<size_t>(a.value)), h));
                    break;
                default:
                    throw sycl::exception(sycl::make_error_code(sycl::errc::kernel_argument),
                                          "unknown argument kind " + std::to_string(a.kind));
                }
            }
            switch (dims) {
            case 1: submit_nd<1>(h, p->kernel, global, local); break;
            case 2: submit_nd<2>(h, p->kernel, global, local); break;
            default: submit_nd<3>(h, p->kernel, global, local); break;
            }
        });
        ev.wait_and_throw();
        std::string async = drain_async(q);
        if (!async.empty()) {
            return fail(err, KFS_LAUNCH, "the kernel failed: " + async);
        }
        uint64_t start = ev.get_profiling_info<sycl::info::event_profiling::command_start>();
        uint64_t end = ev.get_profiling_info<sycl::info::event_profiling::command_end>();
        *nanoseconds = end > start ? end - start : 0;
        return KFS_OK;
    });
}

} // extern "C"
