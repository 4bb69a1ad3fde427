// mcdma._mcdma's KV-cache hand-off: _KvExport, _KvImport and _KvPool over
// libmcdma's mcdma::kv (mcdma/kv.hpp); mcdma/_kv_export.py and
// _kv_import.py are the Python API on top. Each object keeps its _Core
// alive. Everything that can wait runs without the GIL; Pull's on_layer
// callback takes it back on the pulling thread (a Python thread), never on
// a library thread (gil.hpp).
#include "mcdma/kv.hpp"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "core.hpp"
#include "errors.hpp"
#include "gil.hpp"
#include "kv/wire.hpp"

namespace py = pybind11;

namespace mcdma::python {
namespace {

using std::chrono::milliseconds;

struct KvPool {
  std::shared_ptr<Core> core;
  std::unique_ptr<kv::BufferPool> pool;
};

struct KvExport {
  std::shared_ptr<Core> core;
  std::unique_ptr<kv::Export> exp;
};

struct KvImport {
  std::shared_ptr<Core> core;
  std::shared_ptr<KvPool> pool;  // kept alive while the import is
  std::unique_ptr<kv::Import> imp;
};

py::tuple LayerTuple(const kv::LayerStats& l) {
  return py::make_tuple(l.index, l.nbytes, l.published_at, l.pull_s, l.verify_s, l.landed_at);
}

std::vector<Buffer> Buffers(const std::vector<const PyBuffer*>& in) {
  std::vector<Buffer> out;
  out.reserve(in.size());
  for (const PyBuffer* b : in) out.push_back(b->get());
  return out;
}

}  // namespace

void BindKv(py::module_& m) {
  py::class_<KvPool, std::shared_ptr<KvPool>>(m, "_KvPool")
      .def(py::init([](std::shared_ptr<Core> core, uint64_t max_idle_bytes) {
             auto p = std::make_shared<KvPool>();
             p->pool = std::make_unique<kv::BufferPool>(core->Open(), max_idle_bytes);
             p->core = std::move(core);
             return p;
           }),
           py::arg("core"), py::arg("max_idle_bytes"))
      .def("trim", [](KvPool& self) { WithoutGil([&] { self.pool->Trim(); }); })
      .def("counters", [](KvPool& self) {
        auto c = self.pool->counters();
        return py::make_tuple(c.buffers, c.free_bytes, c.hits, c.misses);
      });

  py::class_<KvExport>(m, "_KvExport")
      .def(py::init([](std::shared_ptr<Core> core, const std::string& id,
                       const std::vector<const PyBuffer*>& layers, const std::string& manifest_json,
                       std::vector<std::string> allowed_peers, std::optional<double> ttl,
                       bool checksum) {
             kv::ExportOptions o;
             o.allowed_peers = std::move(allowed_peers);
             o.ttl = SecondsToMs(ttl, "ttl");
             o.checksum = checksum;
             auto buffers = Buffers(layers);
             Client& client = core->Open();
             auto made = WithoutGil([&] {
               return kv::Export::Create(client, id, std::move(buffers), manifest_json, o);
             });
             return KvExport{std::move(core), Check(std::move(made))};
           }),
           py::arg("core"), py::arg("handoff_id"), py::arg("layers"), py::arg("manifest_json"),
           py::arg("allowed_peers"), py::arg("ttl"), py::arg("checksum"))
      .def_property_readonly("manifest_json",
                             [](KvExport& self) { return self.exp->manifest_json(); })
      .def_property_readonly(
          "state",
          [](KvExport& self) {
            return WithoutGil([&] { return std::string(kv::StateName(self.exp->state())); });
          })
      .def("publish",
           [](KvExport& self, uint32_t layer) {
             Check(WithoutGil([&] { return self.exp->PublishLayer(layer); }));
           })
      .def("wait_consumed",
           [](KvExport& self, uint32_t count, std::optional<double> timeout) {
             milliseconds t = timeout ? SecondsToMs(timeout) : milliseconds(INT64_MAX / 4);
             return Check(WithoutGil([&] { return self.exp->WaitConsumed(count, t); }));
           })
      .def("revoke",
           [](KvExport& self, const std::string& reason) {
             Check(WithoutGil([&] { return self.exp->Revoke(reason); }));
           })
      .def("close", [](KvExport& self) { WithoutGil([&] { self.exp->Close(); }); });

  py::class_<KvImport>(m, "_KvImport")
      .def(py::init([](std::shared_ptr<Core> core, const std::string& peer, const std::string& id,
                       const std::string& expect_json, const std::string& token_digest,
                       double deadline, bool verify, double open_wait,
                       std::optional<std::vector<const PyBuffer*>> buffers,
                       std::shared_ptr<KvPool> pool) {
             kv::ImportOptions o;
             o.expect_json = expect_json;
             o.token_digest = token_digest;
             o.deadline = SecondsToMs(deadline, "deadline");
             o.verify = verify;
             o.open_wait = open_wait > 0 ? SecondsToMs(open_wait, "open_wait") : milliseconds(0);
             if (buffers) o.buffers = Buffers(*buffers);
             if (pool) o.pool = pool->pool.get();
             Client& client = core->Open();
             auto opened = WithoutGil([&] { return kv::Import::Open(client, peer, id, o); });
             return KvImport{std::move(core), std::move(pool), Check(std::move(opened))};
           }),
           py::arg("core"), py::arg("peer"), py::arg("handoff_id"), py::arg("expect_json"),
           py::arg("token_digest"), py::arg("deadline"), py::arg("verify"), py::arg("open_wait"),
           py::arg("buffers"), py::arg("pool"))
      .def_property_readonly("manifest_json",
                             [](KvImport& self) { return self.imp->manifest_json(); })
      .def("buffers",
           [](KvImport& self) {
             py::list out;
             for (const Buffer& b : self.imp->buffers())
               out.append(py::cast(std::make_unique<PyBuffer>(b)));
             return out;
           })
      .def("pull",
           [](KvImport& self, std::optional<py::function> on_layer) {
             std::optional<py::error_already_set> raised;
             std::function<void(uint32_t)> cb;
             if (on_layer) {
               cb = [&](uint32_t layer) {
                 py::gil_scoped_acquire gil;
                 if (raised) return;
                 try {
                   (*on_layer)(layer);
                 } catch (py::error_already_set& e) {
                   raised.emplace(std::move(e));
                 }
               };
             }
             Status st = WithoutGil([&] { return self.imp->Pull(cb); });
             if (raised) throw std::move(*raised);
             Check(st);
           })
      .def("wait_layer",
           [](KvImport& self, uint32_t layer, std::optional<double> timeout) {
             milliseconds t = timeout ? SecondsToMs(timeout) : milliseconds(INT64_MAX / 4);
             return LayerTuple(Check(WithoutGil([&] { return self.imp->WaitLayer(layer, t); })));
           })
      .def("stats",
           [](KvImport& self) {
             auto s = self.imp->stats();
             py::list layers;
             for (const auto& l : s.layers) layers.append(LayerTuple(l));
             return py::make_tuple(s.open_s, s.total_s, s.bytes, layers);
           })
      .def("close", [](KvImport& self) { WithoutGil([&] { self.imp->Close(); }); });

  // The wire checks, for mcdma._kv_wire (and its fuzzer): INVALID raised as
  // mcdma.Invalid.
  m.def("_kv_check_manifest", [](const std::string& reply_json) {
    auto reply = Check(kv::wire::ParseObject(reply_json, "hand-off reply"));
    auto manifest = Check(kv::wire::CheckManifest(kv::wire::Field(reply, "manifest")));
    return manifest.layer_nbytes;
  });
  m.def("_kv_check_published", [](const std::string& reply_json, uint32_t n_layers) {
    auto reply = Check(kv::wire::ParseObject(reply_json, "hand-off reply"));
    auto events = Check(kv::wire::CheckPublished(reply, n_layers));
    std::vector<uint32_t> layers;
    layers.reserve(events.size());
    for (const auto& e : events) layers.push_back(e.layer);
    return layers;
  });
  m.def("_kv_mismatches", [](const std::string& manifest_json, const std::string& expect_json) {
    auto manifest = Check(kv::wire::ParseObject(manifest_json, "hand-off manifest"));
    auto expect = Check(kv::wire::ParseObject(expect_json, "expect"));
    return kv::wire::Mismatches(manifest, expect);
  });
}

}  // namespace mcdma::python
