// The Python face (import attnlab): the engine, scenarios, models and their analyses for
// notebooks, through the same library entry points the CLI calls. Results are NumPy arrays
// over the C++ results themselves (no copy: each array keeps its owner alive); JSON-shaped
// results cross as the CLI prints them (nlohmann's text, read back by Python's json), so a
// number here is the CLI's number, bit for bit. attnlab/__init__.py wraps this module.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/attribution_json.hpp"
#include "attnlab/analysis/capacity_json.hpp"
#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/experiment.hpp"
#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/model_head.hpp"
#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/core/limits.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/generate.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/capacity.hpp"
#include "attnlab/operations/generate.hpp"
#include "attnlab/operations/model.hpp"
#include "attnlab/operations/operations.hpp"
#include "attnlab/operations/survey.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/report/trace_json.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace py = pybind11;
using nlohmann::json;

namespace attnlab {
namespace {

// ---- arrays and JSON across the boundary --------------------------------------------------

// A read-only array over `data`, which `owner` (the Python object holding it) keeps alive.
template <class T>
py::array view(const T* data, std::vector<py::ssize_t> shape, py::handle owner) {
  py::array a(py::dtype::of<T>(), std::move(shape), data, owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}
py::array view(const Matrix& m, py::handle owner) {
  return view(m.data.data(), {py::ssize_t(m.rows), py::ssize_t(m.cols)}, owner);
}
py::array view(const std::vector<double>& v, py::handle owner) {
  return view(v.data(), {py::ssize_t(v.size())}, owner);
}

// JSON as the CLI prints it, read by Python's json module: the same numbers, the same keys.
// A JSON value as Python's own, node by node (no text between them): what json.loads would
// give for the command's --json, a number that is not finite as None (JSON's null).
py::object to_python(const json& j) {
  switch (j.type()) {
    case json::value_t::boolean: return py::bool_(j.get<bool>());
    case json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case json::value_t::number_float: {
      const double x = j.get<double>();
      return std::isfinite(x) ? py::object(py::float_(x)) : py::object(py::none());
    }
    case json::value_t::string: return py::str(j.get_ref<const std::string&>());
    case json::value_t::array: {
      py::list out(j.size());
      for (std::size_t i = 0; i < j.size(); ++i)
        out[i] = to_python(j[i]);
      return out;
    }
    case json::value_t::object: {
      py::dict out;
      for (const auto& [key, value] : j.items())
        out[py::str(key)] = to_python(value);
      return out;
    }
    default: return py::none();
  }
}

// A function's keyword arguments as attnlab/__init__.py sends them (a dict of numbers, text,
// lists, NumPy arrays and scalars) as the JSON object the operation's reader reads. What is
// not one of those is refused naming its place ("arguments.ablate[2]"), as is nesting past 16.
json from_python(py::handle value, const std::string& where, int depth = 0) {
  if (depth > 16) fail(where, "nests deeper than 16 levels");
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    if (value.cast<py::int_>() < py::int_(0)) return value.cast<std::int64_t>();
    return value.cast<std::uint64_t>();
  }
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::dict>(value)) {
    json out = json::object();
    for (const auto& [key, item] : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key)) fail(where, "has a key that is not text");
      const std::string name = key.cast<std::string>();
      out[name] = from_python(item, where + "." + name, depth + 1);
    }
    return out;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    json out = json::array();
    std::size_t k = 0;
    for (const py::handle item : value)
      out.push_back(from_python(item, fmt::format("{}[{}]", where, k++), depth + 1));
    return out;
  }
  if (py::hasattr(value, "tolist")) return from_python(value.attr("tolist")(), where, depth + 1);  // NumPy's
  fail(where, fmt::format("{} is not a number, text or list",
                          py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
}

json arguments_json(const py::dict& arguments) {
  json out = json::object();
  for (const auto& [key, value] : arguments) {
    const std::string name = key.cast<std::string>();
    out[name] = from_python(value, name);
  }
  return out;
}

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

Matrix matrix_from(const Array& a, const char* name) {
  if (a.ndim() != 2) fail(name, fmt::format("is {}-dimensional; give a 2-D array [rows × columns]", a.ndim()));
  Matrix m(std::size_t(a.shape(0)), std::size_t(a.shape(1)));
  std::copy_n(a.data(), a.size(), m.data.data());
  return m;
}

// ---- the engine: attend (every intermediate) and flash (the fast kernel) ------------------

// A scenario run, kept whole: the trace and the scenario its JSON is written against.
struct TraceResult {
  Scenario scenario;
  Trace trace;
  KernelKind kernel = KernelKind::reference;
  std::optional<InterventionResult> intervention;

  // What `attnlab run --json` prints for the same scenario and flags.
  json to_json() const {
    json reply = trace_to_json(scenario, trace);
    reply["kernel"] = std::string(to_string(kernel));
    if (kernel == KernelKind::reference)
      reply["intervention"] = intervention ? intervention_to_json(*intervention) : json(nullptr);
    return reply;
  }
};

// The scenario whose one head computes softmax(q·kᵀ · scale / T) · v for the given q, k, v:
// queries embedded as [q_i | 0], keys as [k_j | v_j] (cross-attention's source), and
// W_Q = W_K = [I; 0], W_V = [0; I] pick them out exactly (each product adds zeros).
Scenario qkv_scenario(const Matrix& q, const Matrix& k, const Matrix& v, bool causal, double temperature,
                      std::optional<std::size_t> window, std::optional<double> scale) {
  if (q.cols != k.cols)
    fail("k", fmt::format("has {} columns and q {}; queries and keys share their width d_k", k.cols, q.cols));
  if (k.rows != v.rows)
    fail("v", fmt::format("has {} rows and k {}; each key has its value (m rows in both)", v.rows, k.rows));
  if (q.rows == 0 || k.rows == 0 || q.cols == 0 || v.cols == 0)
    fail(q.rows == 0 ? "q" : k.rows == 0 ? "k" : q.cols == 0 ? "q" : "v", "is empty; give at least one row and column");
  const std::size_t n = q.rows, m = k.rows, d_k = q.cols, d_v = v.cols, width = d_k + d_v;
  Scenario s;
  s.name = "attend";
  s.embeddings = Matrix(n, width);
  SourceSequence source{{}, Matrix(m, width)};
  for (std::size_t i = 0; i < n; ++i) {
    s.tokens.push_back(fmt::format("q{}", i));
    std::copy_n(q.data.data() + i * d_k, d_k, s.embeddings.data.data() + i * width);
  }
  for (std::size_t j = 0; j < m; ++j) {
    source.tokens.push_back(fmt::format("k{}", j));
    std::copy_n(k.data.data() + j * d_k, d_k, source.embeddings.data.data() + j * width);
    std::copy_n(v.data.data() + j * d_v, d_v, source.embeddings.data.data() + j * width + d_k);
  }
  s.source = std::move(source);
  HeadSpec head;
  head.name = "head";
  head.w_q = Matrix(width, d_k);
  head.w_v = Matrix(width, d_v);
  for (std::size_t a = 0; a < d_k; ++a)
    head.w_q.data[a * d_k + a] = 1.0;
  for (std::size_t a = 0; a < d_v; ++a)
    head.w_v.data[(d_k + a) * d_v + a] = 1.0;
  head.w_k = head.w_q;
  s.heads.push_back(std::move(head));
  s.mask.causal = causal;
  s.mask.window = window;
  s.temperature = temperature;
  if (scale) {
    if (!(*scale > 0)) fail("scale", fmt::format("must be a number > 0 (leave it out for 1/√d_k) but is {}", *scale));
    s.score_scale = *scale;
  }
  validate(s);
  return s;
}

// The tiled kernel over [H × n × d_k] queries, [H_kv × m × d_k] keys, [H_kv × m × d_v] values
// (or one head's 2-D arrays): the outputs [H × n × d_v], in f32 (or bf16 products).
py::array flash(const FloatArray& q, const FloatArray& k, const FloatArray& v, bool causal, double temperature,
                std::optional<std::size_t> window, std::optional<double> scale, const std::string& precision,
                int threads) {
  const bool one_head = q.ndim() == 2;
  for (const auto& [a, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}})
    if (a->ndim() != (one_head ? 2 : 3))
      fail(name, fmt::format("is {}-dimensional; give q, k and v as [n × d] arrays, or as [heads × n × d]", a->ndim()));
  const auto dim = [&](const FloatArray& a, int axis) { return std::size_t(a.shape(one_head ? axis - 1 : axis)); };
  AttentionShape shape{.heads = one_head ? 1 : std::size_t(q.shape(0)),
                       .kv_heads = one_head ? 1 : std::size_t(k.shape(0)),
                       .n = dim(q, 1),
                       .m = dim(k, 1),
                       .d_k = dim(q, 2),
                       .d_v = dim(v, 2)};
  if (dim(k, 2) != shape.d_k) fail("k", fmt::format("is {} wide and q {}; they share d_k", dim(k, 2), shape.d_k));
  if (dim(v, 1) != shape.m) fail("v", fmt::format("has {} rows and k {}; each key has its value", dim(v, 1), shape.m));
  if (!one_head && std::size_t(v.shape(0)) != shape.kv_heads)
    fail("v", fmt::format("has {} heads and k {}; keys and values share H_kv", v.shape(0), shape.kv_heads));
  if (shape.kv_heads == 0 || shape.heads % shape.kv_heads != 0)
    fail("k", fmt::format("has {} key/value heads, which does not divide q's {} heads (grouped-query attention "
                          "shares each among H / H_kv query heads)",
                          shape.kv_heads, shape.heads));
  if (shape.n == 0 || shape.m == 0 || shape.d_k == 0 || shape.d_v == 0)
    fail(shape.n == 0 || shape.d_k == 0 ? "q"
         : shape.m == 0                 ? "k"
                                        : "v",
         "is an empty array; give at least one token and one column");
  const auto limits = [](std::size_t tokens, std::size_t width) {
    return fmt::format("{} tokens × {} wide is past attnlab's limits ({} tokens, {} wide)", tokens, width, kMaxTokens,
                       kMaxWidth);
  };
  if (shape.n > kMaxTokens || shape.d_k > kMaxWidth) fail("q", limits(shape.n, shape.d_k));
  if (shape.m > kMaxTokens) fail("k", limits(shape.m, shape.d_k));
  if (shape.d_v > kMaxWidth) fail("v", limits(shape.m, shape.d_v));
  if (!(temperature > 0) || !std::isfinite(temperature))
    fail("temperature", fmt::format("must be a finite number > 0 but is {}", temperature));
  if (window && *window == 0) fail("window", "must be at least 1 (or None: no window)");
  if (scale && !(*scale > 0)) fail("scale", fmt::format("must be a number > 0 (or None: 1/√d_k) but is {}", *scale));
  AttentionOptions options{.causal = causal, .window = window, .temperature = temperature, .scale = scale};
  if (precision == "bf16")
    options.precision = Precision::bf16;
  else if (precision != "f32")
    fail("precision", fmt::format("\"{}\" is not a precision; give \"f32\" or \"bf16\"", precision));
  options.threads = threads;
  std::vector<py::ssize_t> out_shape{py::ssize_t(shape.n), py::ssize_t(shape.d_v)};
  if (!one_head) out_shape.insert(out_shape.begin(), py::ssize_t(shape.heads));
  py::array_t<float> out(out_shape);
  float* o = out.mutable_data();
  {
    py::gil_scoped_release free;
    flash_attention(q.data(), k.data(), v.data(), o, shape, options);
  }
  return out;
}

// ---- scenarios ----------------------------------------------------------------------------

struct RunOptions {
  std::optional<bool> causal;
  std::optional<double> temperature;
  std::optional<std::size_t> window, query;
  std::vector<std::size_t> mask_tokens;
  std::vector<std::string> ablate_heads, scale_heads;
  std::string kernel = "reference";
};

// As `attnlab run` with the same flags: overrides first, then the interventions reported
// before and after (a masked token is a knock-out, as --mask-token is).
std::shared_ptr<TraceResult> run_scenario_with(const Scenario& scenario, const RunOptions& r) {
  Experiment e{scenario, {}, {}, kernel_named(r.kernel, "kernel"), ""};
  Overrides o;
  o.causal = r.causal, o.temperature = r.temperature, o.window = r.window, o.query = r.query;
  apply_overrides(e.scenario, o);
  for (std::size_t j : r.mask_tokens)
    e.interventions.knock_out.push_back({j, fmt::format("mask_tokens {}", j)});
  for (const std::string& text : r.ablate_heads)
    e.interventions.ablate.push_back(parse_ablate_head(text, "ablate_heads " + text));
  for (const std::string& text : r.scale_heads)
    e.interventions.scale.push_back(parse_scale_head(text, "scale_heads " + text));
  ExperimentResult result;
  {
    py::gil_scoped_release free;
    result = run_experiment(e);
  }
  return std::make_shared<TraceResult>(
      TraceResult{std::move(result.scenario), std::move(result.trace), result.kernel, std::move(result.intervention)});
}

// ---- models -------------------------------------------------------------------------------

struct PyModel {
  std::shared_ptr<const ModelDir> dir;
  const Model& model() const { return dir->model; }
  const ModelConfig& config() const { return dir->model.config; }
  TokenText token_text() const {
    return [d = dir](int id) { return token_texts(*d, {id})[0]; };
  }
};

// One forward pass, kept whole; its arrays are views of it.
struct ModelRun {
  std::shared_ptr<const ModelDir> dir;
  std::vector<int> ids;
  ForwardResult result;
  std::size_t top_k = 5;                   // the request's, top_k()'s default
  std::shared_ptr<TraceResult> explained;  // layer.head as a scenario's trace, when asked
};

PyModel load(const std::string& path) {
  py::gil_scoped_release free;
  return PyModel{std::make_shared<const ModelDir>(open_model_dir(path))};
}

// Model.run: the `model run` operation's request (operations/model.hpp), the forward it asks
// for, and the head it names explained as `attnlab model run --layer --head` explains it.
std::shared_ptr<ModelRun> run_model(const PyModel& m, const py::dict& arguments) {
  const RunRequest request = read_request<RunRequest>(arguments_json(arguments), kPython);
  const RunPlan plan = price_run(*m.dir, request);
  auto run = std::make_shared<ModelRun>(ModelRun{m.dir, plan.ids, {}, plan.top_k, nullptr});
  py::gil_scoped_release free;
  run->result = model_forward(m.model(), run->ids, plan.options);
  if (plan.head) {
    std::vector<std::string> texts;
    for (const TokenShown& t : show_tokens(*m.dir, run->ids))
      texts.push_back(t.text);
    Scenario s = model_head_scenario(m.model(), run->result, texts, *plan.head);
    Trace trace = run_scenario(s);
    run->explained = std::make_shared<TraceResult>(TraceResult{std::move(s), std::move(trace)});
  }
  return run;
}

// A list of arrays [rows × width] over `vectors` (one per layer), owned by `owner`.
py::list layer_views(const std::vector<std::vector<float>>& vectors, std::vector<py::ssize_t> shape, py::handle owner) {
  py::list out;
  for (const std::vector<float>& v : vectors)
    out.append(view(v.data(), shape, owner));
  return out;
}

}  // namespace
}  // namespace attnlab

PYBIND11_MODULE(_attnlab, mod) {
  using namespace attnlab;
  mod.doc() = "attnlab's engine, scenarios and models (see help(attnlab))";
  mod.attr("__version__") = ATTNLAB_VERSION;
  // Bad input is a ValueError with the message the CLI prints after "attnlab: ".
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<HeadTrace>(mod, "HeadTrace", "One head's every intermediate: arrays that are views of the trace")
      .def("__repr__",
           [](const HeadTrace& h) {
             return fmt::format("<attnlab.HeadTrace {}: n={}, m={}, d_k={}, d_v={}>", h.name, h.weights.rows,
                                h.weights.cols, h.d_k, h.d_v);
           })
      .def_readonly("name", &HeadTrace::name)
      .def_readonly("d_k", &HeadTrace::d_k)
      .def_readonly("d_v", &HeadTrace::d_v)
#define ATTNLAB_ARRAY(field, doc) \
  def_property_readonly(          \
      #field, [](py::object self) { return view(self.cast<const HeadTrace&>().field, self); }, doc)
      .ATTNLAB_ARRAY(queries, "[n × d_k] q = x·W_Q (+ b_Q, rotated when the positions are rotary)")
      .ATTNLAB_ARRAY(keys, "[m × d_k] k = x·W_K")
      .ATTNLAB_ARRAY(values, "[m × d_v] v = x·W_V")
      .ATTNLAB_ARRAY(scores, "[n × m] q·kᵀ")
      .ATTNLAB_ARRAY(scaled, "[n × m] scores × scale (1/√d_k unless the scenario says)")
      .ATTNLAB_ARRAY(logits, "[n × m] scaled ÷ T, -inf where masked")
      .ATTNLAB_ARRAY(exponentials, "[n × m] exp(logit − shift): what softmax normalises")
      .ATTNLAB_ARRAY(weights, "[n × m] softmax: each row sums to 1 (0 where masked)")
      .ATTNLAB_ARRAY(mixed, "[n × d_v] weights · v")
      .ATTNLAB_ARRAY(output, "[n × d_v] the head's output (mixed, after an intervention's scale or ablation)")
      .ATTNLAB_ARRAY(shifts, "[n] subtracted before exp: 0, or the row's largest logit when that is beyond ±60")
      .ATTNLAB_ARRAY(row_sums, "[n] each row's sum of exponentials")
#undef ATTNLAB_ARRAY
      .def_property_readonly(
          "fully_masked",
          [](const HeadTrace& h) { return std::vector<bool>(h.fully_masked.begin(), h.fully_masked.end()); },
          "[n] rows with every key masked (their weights are all 0)");

  py::class_<TraceResult, std::shared_ptr<TraceResult>>(mod, "_Trace")
      .def_property_readonly("tokens", [](const TraceResult& t) { return t.trace.tokens; })
      .def_property_readonly("source_tokens", [](const TraceResult& t) { return t.trace.source_tokens; })
      .def_property_readonly("heads",
                             [](py::object self) {
                               auto& t = self.cast<TraceResult&>();
                               py::list heads;
                               for (HeadTrace& h : t.trace.heads)
                                 heads.append(py::cast(&h, py::return_value_policy::reference_internal, self));
                               return heads;
                             })
      .def_property_readonly("output",
                             [](py::object self) { return view(self.cast<const TraceResult&>().trace.output, self); })
      .def_property_readonly(
          "concatenated",
          [](py::object self) { return view(self.cast<const TraceResult&>().trace.concatenated, self); })
      .def_property_readonly("kernel", [](const TraceResult& t) { return std::string(to_string(t.kernel)); })
      .def("to_json", [](const TraceResult& t) { return to_python(t.to_json()); })
      .def("scenario_json", [](const TraceResult& t) { return to_python(scenario_to_json(t.scenario)); })
      .def("intervention_json", [](const TraceResult& t) {
        return t.intervention ? to_python(intervention_to_json(*t.intervention)) : py::none();
      });

  mod.def(
      "_attend",
      [](const Array& q, const Array& k, const Array& v, bool causal, double temperature,
         std::optional<std::size_t> window, std::optional<double> scale) {
        Scenario s = qkv_scenario(matrix_from(q, "q"), matrix_from(k, "k"), matrix_from(v, "v"), causal, temperature,
                                  window, scale);
        Trace trace;
        {
          py::gil_scoped_release free;
          trace = run_scenario(s);
        }
        return std::make_shared<TraceResult>(TraceResult{std::move(s), std::move(trace)});
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("temperature"), py::arg("window"),
      py::arg("scale"));
  mod.def("_flash", &flash, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("temperature"),
          py::arg("window"), py::arg("scale"), py::arg("precision"), py::arg("threads"));

  py::class_<Scenario>(mod, "_Scenario")
      .def_readonly("name", &Scenario::name)
      .def_readonly("description", &Scenario::description)
      .def_readonly("tokens", &Scenario::tokens)
      .def_property_readonly("n", &Scenario::n)
      .def_property_readonly("m", &Scenario::m)
      .def_property_readonly("d_model", &Scenario::d_model)
      .def("to_json", [](const Scenario& s) { return to_python(scenario_to_json(s)); });
  mod.def("_load_scenario", [](const std::string& name) { return load_scenario(name); });
  mod.def("_parse_scenario", [](const std::string& text) { return parse_scenario(text, "the scenario given"); });
  mod.def("_scenario_names", &bundled_scenario_names);
  mod.def(
      "_run_scenario",
      [](const Scenario& s, std::optional<bool> causal, std::optional<double> temperature,
         std::optional<std::size_t> window, std::optional<std::size_t> query, std::vector<std::size_t> mask_tokens,
         std::vector<std::string> ablate_heads, std::vector<std::string> scale_heads, std::string kernel) {
        return run_scenario_with(s, {causal, temperature, window, query, std::move(mask_tokens),
                                     std::move(ablate_heads), std::move(scale_heads), std::move(kernel)});
      },
      py::arg("scenario"), py::arg("causal"), py::arg("temperature"), py::arg("window"), py::arg("query"),
      py::arg("mask_tokens"), py::arg("ablate_heads"), py::arg("scale_heads"), py::arg("kernel"));

  py::class_<ModelRun, std::shared_ptr<ModelRun>>(mod, "_ModelRun")
      .def("__repr__",
           [](const ModelRun& r) {
             return fmt::format("<attnlab._ModelRun: {} tokens, logits from position {}{}{}>", r.result.n,
                                r.result.logits_from, r.result.attention.empty() ? "" : ", attention kept",
                                r.result.stream.empty() ? "" : ", stream kept");
           })
      .def_readonly("ids", &ModelRun::ids)
      .def_readonly("top_k_default", &ModelRun::top_k)
      .def_readonly("explained", &ModelRun::explained)
      .def_property_readonly("n", [](const ModelRun& r) { return r.result.n; })
      .def_property_readonly(
          "logits",
          [](py::object self) {
            const auto& r = self.cast<const ModelRun&>();
            return view(r.result.logits.data(),
                        {py::ssize_t(r.result.n - r.result.logits_from), py::ssize_t(r.dir->model.config.vocab_size)},
                        self);
          })
      .def_property_readonly("attention",
                             [](py::object self) {
                               const auto& r = self.cast<const ModelRun&>();
                               const auto n = py::ssize_t(r.result.n), H = py::ssize_t(r.dir->model.config.n_head);
                               return layer_views(r.result.attention, {H, n, n}, self);
                             })
      .def_property_readonly("stream",
                             [](py::object self) {
                               const auto& r = self.cast<const ModelRun&>();
                               const auto n = py::ssize_t(r.result.n), d = py::ssize_t(r.dir->model.config.n_embd);
                               py::list layers;
                               for (const LayerStream& s : r.result.stream) {
                                 py::dict layer;
                                 layer["x_in"] = view(s.x_in.data(), {n, d}, self);
                                 layer["attention"] = view(s.attention.data(), {n, d}, self);
                                 layer["mlp"] = view(s.mlp.data(), {n, d}, self);
                                 layers.append(layer);
                               }
                               return layers;
                             })
      .def(
          "top_k",
          [](const ModelRun& r, std::ptrdiff_t position, std::size_t k) {
            const auto n = static_cast<std::ptrdiff_t>(r.result.n);
            if (position < -n || position >= n)
              fail("position", fmt::format("{} is not a position of the run's {} tokens", position, n));
            const std::size_t row = std::size_t(position < 0 ? position + n : position);
            if (r.result.logits_from == r.result.n)
              fail("position", "the run computed no logits (logits=\"none\"); run with logits=\"last\" or \"every\"");
            if (row < r.result.logits_from)
              fail("position", fmt::format("the run computed the logits of positions {} to {} only (run with "
                                           "logits=\"every\" for every position's)",
                                           r.result.logits_from, n - 1));
            py::list out;
            for (const TokenProbability& t : top_k(r.result.logits_at(row), k))
              out.append(py::make_tuple(t.id, token_texts(*r.dir, {t.id})[0], t.probability));
            return out;
          },
          py::arg("position"), py::arg("k"))
      .def_property_readonly("final_stream", [](py::object self) {
        const auto& r = self.cast<const ModelRun&>();
        const auto n = py::ssize_t(r.result.n), d = py::ssize_t(r.dir->model.config.n_embd);
        return view(r.result.final_stream.data(), {r.result.final_stream.empty() ? 0 : n, d}, self);
      });

  py::class_<PyModel>(mod, "_Model")
      .def("__repr__",
           [](const PyModel& m) { return fmt::format("<attnlab._Model {}: {}>", m.dir->dir, describe(m.config())); })
      .def_property_readonly("path", [](const PyModel& m) { return m.dir->dir; })
      .def(
          "operation",
          [](const PyModel& m, const std::string& name, const py::dict& arguments) {
            const json body = arguments_json(arguments);
            json reply;
            {
              py::gil_scoped_release free;
              reply = run_model_operation(name, *m.dir, body, kPython);
            }
            return to_python(reply);
          },
          py::arg("name"), py::arg("arguments"))
      .def_property_readonly("config", [](const PyModel& m) { return to_python(config_json(m.config())); })
      .def("describe", [](const PyModel& m) { return describe(m.config()); })
      .def_property_readonly("has_tokenizer", [](const PyModel& m) { return m.dir->tokenizer.has_value(); })
      .def("token_texts", [](const PyModel& m, const std::vector<int>& ids) { return token_texts(*m.dir, ids); })
      .def("run", &run_model, py::arg("arguments"))
      // The survey on a cluster (attnlab/survey.py): its plan, and its shards' sums merged.
      .def(
          "survey_plan",
          [](const PyModel& m, const py::dict& arguments) {
            const SurveyPlan plan =
                price_survey(*m.dir, read_request<SurveyRequest>(arguments_json(arguments), kPython));
            return to_python({{"documents", plan.documents.size()},
                              {"windows", plan.windows},
                              {"tokens", plan.tokens},
                              {"distinct_tokens", plan.distinct_tokens},
                              {"memory", plan.memory},
                              {"shards", plan.shards},
                              {"corpus", plan.corpus_id}});
          },
          py::arg("arguments"))
      .def(
          "survey_merge",
          [](const PyModel& m, const py::dict& arguments, const py::list& parts) {
            const SurveyRequest request = read_request<SurveyRequest>(arguments_json(arguments), kPython);
            const SurveyPlan plan = price_survey(*m.dir, request);
            const json sums = from_python(parts, "parts");
            json reply;
            {
              py::gil_scoped_release free;
              reply = survey_json(*m.dir, plan, merge_survey_parts(*m.dir, plan, sums, "parts"));
              if (request.html) write_survey_finder(*request.html, reply);
            }
            return to_python(reply);
          },
          py::arg("arguments"), py::arg("parts"));
  mod.def("_load", &load, py::arg("path"));

  // ---- the operations described once (operations/operations.hpp) ----
  // Python's functions take their keyword arguments from these descriptions (attnlab/__init__.py)
  // and send them here as one JSON object, read by the reader every face shares.
  mod.def("_operations", [] { return to_python(operations_json()); });
  mod.def(
      "_cost",
      [](const py::dict& arguments) {
        const CostRequest request = read_request<CostRequest>(arguments_json(arguments), kPython);
        CostResult result = price_cost(request);
        {
          py::gil_scoped_release free;
          measure_cost(request, result);
        }
        return to_python(cost_json(result));
      },
      py::arg("arguments"));
  mod.def(
      "_kv",
      [](const py::dict& arguments) {
        const KvRequest request = read_request<KvRequest>(arguments_json(arguments), kPython);
        KvResult result = price_kv(request);
        {
          py::gil_scoped_release free;
          measure_kv(result);
        }
        return to_python(kv_json(result));
      },
      py::arg("arguments"));
}
