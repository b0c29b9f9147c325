// The attention problem behind a trace, as a document: POST api/attention returns it on
// request ("attention_input": true), the page keeps it, and the page's WebAssembly engine
// (src/wasm/: this file and attend() compiled for the browser) recomputes the trace from it
// at another temperature or with the causal mask toggled, without a round trip.
//
// {"scenario", "tokens", "source_tokens", "positions" (as described in a trace),
//  "queries_from" [n × d_in], "keys_from" [m × d_in] (positions applied), "rope",
//  "heads": [{"name", "w_q", "w_k", "w_v", "ablation", "scale"}], "w_o" (or null),
//  "causal", "window", "mask_tokens", "temperature", and optionally "detail_heads" (as
//  the API's "detail": "weights")}
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnlab/core/attention.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// The document of `input` (attention_input(scenario)); write_matrix writes each matrix.
nlohmann::json input_document(const Scenario& scenario, const AttentionInput& input,
                              const std::function<nlohmann::json(const Matrix&)>& write_matrix);

// Reads a packed input document (its matrices as references or as lists of rows), checks
// every shape and value, runs attend, and returns the trace as the packed reply POST
// api/attention gives with "encoding": "packed". Raises InputError naming the field.
std::string attend_document(std::string_view packed_input);

}  // namespace attnlab
