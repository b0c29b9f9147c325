// The server's model part, shared between the API's translation units (private to
// src/server): a head of the loaded model as a scenario, from a request's
// {"model": {"text" | "ids", "layer", "head"}} (docs/api.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

class ModelSources;  // attnlab/server/model_sources.hpp
struct ModelDir;     // attnlab/model/model_dir.hpp
struct ModelConfig;  // attnlab/model/model.hpp

// The token ids a request runs on: `text` through the model's tokenizer, or `ids` as given;
// one of them, at least one token and at most the model's positions. Errors name
// prefix + "text" or prefix + "ids".
std::vector<int> requested_ids(const ModelDir& m, const nlohmann::json& spec, const std::string& prefix);

// A model request's body without the fields that choose the model ("run", "step"): the
// operation's own fields, for read_request. InputError naming "body" unless an object.
nlohmann::json operation_fields(const nlohmann::json& body);

// The field a request gave its tokens in, for errors about how many there are.
std::string tokens_field(const nlohmann::json& spec, const std::string& prefix);

// A forward pass's work, priced for admission (admission.hpp): it reads every weight once
// and keeps L × H × n² attention weights, 4 bytes each.
std::uint64_t forward_work_bytes(const ModelConfig& c, std::size_t n);

// Head spec["layer"].spec["head"] of the model spec names (its "run" and "step", default the
// --model directory's final model) on spec's text or ids, as a scenario
// (model_head_scenario). Errors name their field under `field` ("scenario.model"); a
// server without a model refuses naming "model". Priced before the forward pass runs: at
// most the model's positions, and at most kMaxApiTraceCells score cells.
Scenario model_head_request(const ModelSources& models, const nlohmann::json& spec, const std::string& field);

}  // namespace attnlab
