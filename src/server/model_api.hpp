// The server's model part, shared between the API's translation units (private to
// src/server): a head of the loaded model as a scenario, from a request's
// {"model": {"text" | "ids", "layer", "head"}} (docs/api.md).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

class ModelSources;  // attnlab/server/model_sources.hpp

// Head spec["layer"].spec["head"] of the model spec names (its "run" and "step", default the
// --model directory's final model) on spec's text or ids, as a scenario
// (model_head_scenario). Errors name their field under `field` ("scenario.model"); a
// server without a model refuses naming "model". Priced before the forward pass runs: at
// most the model's positions, and at most kMaxApiTraceCells score cells.
Scenario model_head_request(const ModelSources& models, const nlohmann::json& spec, const std::string& field);

}  // namespace attnlab
