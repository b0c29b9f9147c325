// Interventions, POST /api/probe and the input document the page's engine reads, through real
// HTTP (api_test_support.hpp).
#include "api_test_support.hpp"

// ---- interventions and POST /api/probe ---------------------------------------------

TEST_F(Api, AttentionInterventionOptionsReportBeforeAfterAndDelta) {
  const json plain = post_json({{"scenario", "multi-head"}});
  EXPECT_TRUE(plain["intervention"].is_null());
  EXPECT_TRUE(plain["heads"][0]["ablation"].is_null());
  EXPECT_EQ(plain["heads"][0]["scale"], 1.0);
  EXPECT_EQ(plain["heads"][0]["mixed"], plain["heads"][0]["output"]);

  const json t =
      post_json({{"scenario", "multi-head"},
                 {"options",
                  {{"ablate_heads", {{{"head", 0}, {"kind", "uniform"}}, "1:mean"}},
                   {"scale_heads", {{{"head", 2}, {"factor", 0.5}}}},
                   {"replace_tokens", {{{"index", 3}, {"word", "cat"}}, {{"index", 4}, {"embedding", {1, 0, 0}}}}},
                   {"mask_tokens", {2}}}}});
  EXPECT_EQ(t["heads"][0]["ablation"], "uniform");
  EXPECT_EQ(t["heads"][1]["ablation"], "mean");
  EXPECT_EQ(t["heads"][2]["scale"], 0.5);
  EXPECT_EQ(t["tokens"][3], "cat");
  EXPECT_NEAR(t["heads"][0]["weights"][9][0].get<double>(), 1.0 / 9.0, 1e-15) << "uniform over the 9 keys left visible";
  EXPECT_EQ(t["scenario_json"]["heads"][1]["ablation"], "mean") << "the effective scenario carries the ablation";
  const json& iv = t["intervention"];
  ASSERT_EQ(iv["applied"].size(), 6u);
  EXPECT_EQ(iv["applied"][0], "replace token 3 \"fox\" by \"cat\"");
  EXPECT_EQ(iv["after"], t["output"]) << "no permutation: rows stay";
  for (std::size_t i = 0; i < 10; ++i) {
    double squares = 0;
    for (std::size_t c = 0; c < 6; ++c) {
      const double d = iv["after"][i][c].get<double>() - iv["before"][i][c].get<double>();
      EXPECT_NEAR(iv["delta"][i][c].get<double>(), d, 1e-12);
      squares += d * d;
    }
    EXPECT_NEAR(iv["delta_norm"][i].get<double>(), std::sqrt(squares), 1e-12);
  }
}

TEST_F(Api, MaskAndPermuteAreInterventionsToo) {
  const json t = post_json({{"scenario", "three-tokens"}, {"options", {{"permute", {2, 0, 1}}, {"mask_tokens", {0}}}}});
  const json& iv = t["intervention"];
  EXPECT_EQ(iv["after_row"], json::parse("[1, 2, 0]"));
  EXPECT_EQ(t["mask_tokens"], json::parse("[1]")) << "t1 moved to row 1 and stays hidden";
  EXPECT_EQ(iv["before"][2][0].get<double>(), t["output"][0][0].get<double>() - iv["delta"][2][0].get<double>());
}

TEST_F(Api, ProbeGivesTheMeasuresSerranoSmithAndTheCounterfactual) {
  const json mislead = post_to(client(), "/api/probe", {{"scenario", "weights-mislead"}}, 200);
  EXPECT_EQ(mislead["query"], 5);
  EXPECT_EQ(mislead["readout"]["kind"], "class");
  EXPECT_EQ(mislead["readout"]["class"], "negative");
  EXPECT_EQ(mislead["decision"], "negative");
  ASSERT_EQ(mislead["tokens"].size(), 6u);
  EXPECT_EQ(mislead["serrano_smith"]["top_weight"], 0);
  EXPECT_EQ(mislead["serrano_smith"]["top_erasure"], 4);
  EXPECT_EQ(mislead["serrano_smith"]["weights_agree"], false);
  EXPECT_EQ(mislead["serrano_smith"]["top_flips"], false);
  EXPECT_EQ(mislead["serrano_smith"]["others_flipping"], json::parse("[4]"));
  EXPECT_EQ(mislead["tokens"][4]["decision_without"], "positive");
  EXPECT_TRUE(mislead["kendall_tau"]["erasure"].is_number());
  const json& cf = mislead["counterfactual"];
  double sum = 0;
  for (const json& w : cf["found"])
    sum += w.get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_LE(std::abs(cf["readout_after"].get<double>() - cf["readout_before"].get<double>()), 0.01);
  EXPECT_GT(cf["divergence"].get<double>(), 0.0);

  const json agree = post_to(client(), "/api/probe", {{"scenario", "weights-agree"}, {"epsilon", 0.05}}, 200);
  EXPECT_EQ(agree["serrano_smith"]["weights_agree"], true);
  EXPECT_EQ(agree["serrano_smith"]["top_flips"], true);
  EXPECT_EQ(agree["counterfactual"]["epsilon"], 0.05);
}

TEST_F(Api, ProbeTakesAQueryAReadoutAndTheInterventionOptions) {
  const json r = post_to(client(), "/api/probe",
                         {{"scenario", "three-tokens"},
                          {"query", 0},
                          {"readout", "direction:1,-1"},
                          {"head", 0},
                          {"options", {{"permute", {2, 0, 1}}, {"ablate_heads", {"0:uniform"}}}}},
                         200);
  EXPECT_EQ(r["query"], 1) << "token 0 (t1) is row 1 after the permutation";
  EXPECT_EQ(r["query_token"], "t1");
  EXPECT_EQ(r["readout"]["kind"], "direction");
  EXPECT_FALSE(r["intervention"].is_null());
  for (const json& t : r["tokens"])
    EXPECT_NEAR(t["weight"].get<double>(), 1.0 / 3.0, 1e-15);
}

TEST_F(Api, BadInterventionAndProbeRequestsGet400WithTheFieldNamed) {
  const auto bad_attention = [&](const json& options, const std::string& message) {
    expect_bad_request({{"scenario", "three-tokens"}, {"options", options}}, message);
  };
  bad_attention({{"ablate_heads", {{{"head", 4}}}}}, "options.ablate_heads[0]: head 4 does not exist");
  bad_attention({{"ablate_heads", {{{"head", 0}, {"kind", "half"}}}}},
                "options.ablate_heads[0].kind: unknown ablation \"half\"");
  bad_attention({{"ablate_heads", 0}}, "options.ablate_heads: expected a list");
  bad_attention({{"scale_heads", {{{"head", 0}}}}}, "options.scale_heads[0]: expected {\"head\": H, \"factor\": F}");
  bad_attention({{"scale_heads", {{{"head", 0}, {"factor", "big"}}}}},
                "options.scale_heads[0].factor: expected a finite number");
  bad_attention({{"replace_tokens", {{{"index", 9}, {"word", "dog"}}}}},
                "options.replace_tokens[0]: token 9 does not exist");
  bad_attention({{"replace_tokens", {{{"index", 0}, {"word", "two words"}}}}}, "is not one word");
  bad_attention({{"replace_tokens", {{{"index", 0}, {"embedding", {1, 2, 3}}}}}},
                "the embedding has 3 numbers but d_model is 2");
  bad_attention({{"replace_tokens", {{{"index", 0}}}}}, "expected {\"index\": J, \"word\": \"dog\"}");
  const auto bad_probe = [&](const json& body, const std::string& message) {
    SCOPED_TRACE(body.dump());
    const json reply = post_to(client(), "/api/probe", body, 400);
    ASSERT_TRUE(reply.contains("error"));
    EXPECT_NE(reply["error"].get<std::string>().find(message), std::string::npos) << reply["error"];
  };
  bad_probe({{"scenario", "three-tokens"}, {"readout", "class"}}, "readout: three-tokens has no readout matrix");
  bad_probe({{"scenario", "three-tokens"}, {"readout", 3}}, "readout: expected a string");
  bad_probe({{"scenario", "three-tokens"}, {"query", 7}}, "query: token 7 does not exist");
  bad_probe({{"scenario", "three-tokens"}, {"head", 2}}, "head: head 2 does not exist");
  bad_probe({{"scenario", "three-tokens"}, {"epsilon", -0.1}}, "epsilon: must be a finite number >= 0");
  bad_probe({{"scenario", "three-tokens"}, {"colour", 1}}, "colour: unknown field");
  bad_probe({{"scenario", "nope"}}, "scenario: unknown scenario \"nope\"");
  auto health = client().Get("/api/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(Api, TheTiledKernelAndLeanTracesAreOptions) {
  const json tiled = post_json({{"scenario", "multi-head"}, {"kernel", "tiled"}});
  const json reference = post_json({{"scenario", "multi-head"}});
  EXPECT_EQ(tiled["kernel"], "tiled");
  EXPECT_EQ(reference["kernel"], "reference");
  EXPECT_NEAR(tiled["output"][5][0].get<double>(), reference["output"][5][0].get<double>(), 1e-4);
  // The tiled reply names its tokens, as the reference's does (one experiment path for both).
  EXPECT_EQ(tiled["tokens"], reference["tokens"]);
  EXPECT_FALSE(tiled["tokens"].empty());
  const json cross = post_json({{"scenario", "cross-attention"}, {"kernel", "tiled"}});
  EXPECT_EQ(cross["source_tokens"], post_json({{"scenario", "cross-attention"}})["source_tokens"]);
  EXPECT_EQ(cross["source_tokens"].size(), 4u);
  const json lean = post_json({{"scenario", "multi-head"}, {"detail", "weights"}, {"detail_heads", {1}}});
  EXPECT_FALSE(lean["heads"][0].contains("scores"));
  EXPECT_TRUE(lean["heads"][0].contains("weights"));
  EXPECT_TRUE(lean["heads"][1].contains("scores")) << "the listed head keeps every intermediate";
  EXPECT_EQ(lean["heads"][2]["weights"], reference["heads"][2]["weights"]);
  expect_bad_request({{"scenario", "three-tokens"}, {"kernel", "gpu"}}, "kernel: \"gpu\" is not a kernel");
  expect_bad_request({{"scenario", "three-tokens"}, {"detail", "some"}}, "detail: \"some\" is not a detail level");
  expect_bad_request({{"scenario", "multi-head"}, {"detail", "weights"}, {"detail_heads", {5}}},
                     "detail_heads: head 5 does not exist; heads run from 0 to 2");
  expect_bad_request({{"scenario", "three-tokens"}, {"kernel", "tiled"}, {"options", {{"mask_tokens", {1}}}}},
                     "interventions run on the reference kernel");
}

TEST_F(Api, PackedRepliesCarryTheSameTraceAsJsonBitForBit) {
  for (const json& request :
       {json{{"scenario", "three-tokens"}, {"options", {{"causal", true}}}},  // masked logits: -inf, null in JSON
        json{{"scenario", "multi-head"}, {"options", {{"temperature", 0.3}, {"mask_tokens", {2}}}}},
        json{{"scenario", "multi-head"}, {"detail", "weights"}, {"detail_heads", {1}}},
        json{{"scenario", "cross-attention"}, {"kernel", "tiled"}}}) {
    SCOPED_TRACE(request.dump());
    const json as_json = post_json(request);
    json packed_request = request;
    packed_request["encoding"] = "packed";
    auto r = post(packed_request.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");
    EXPECT_EQ(r->body.substr(0, 4), "ATLP");
    EXPECT_LT(r->body.size(), as_json.dump().size()) << "the packed trace is the smaller one";
    // json's == compares doubles exactly, so this is bit for bit (up to the sign of 0).
    EXPECT_EQ(attnlab::unpack_reply(r->body), as_json);
  }
  expect_bad_request({{"scenario", "three-tokens"}, {"encoding", "xml"}}, "encoding: \"xml\" is not an encoding");
  expect_bad_request({{"scenario", "three-tokens"}, {"attention_input", 1}}, "attention_input: expected true or false");
  expect_bad_request({{"scenario", "three-tokens"}, {"kernel", "tiled"}, {"attention_input", true}},
                     "attention_input: is given with the reference kernel only");
  expect_bad_request({{"scenario", "nope"}, {"encoding", "packed"}}, "scenario: unknown scenario \"nope\"");
}

// ---- the input document: what the page's WebAssembly engine recomputes from -------------

namespace {
// The reply's fields the input document does not carry (the server adds them).
json without_server_fields(json reply) {
  for (const char* key : {"scenario_json", "intervention", "attention_input"})
    reply.erase(key);
  for (json& head : reply["heads"])
    head.erase("random_seed");
  return reply;
}
}  // namespace

TEST(InputDocument, AttendingTheDocumentGivesTheApisTraceBitForBit) {
  const json rope = json::parse(R"({"format": "attnlab-scenario/1", "name": "rope-test", "tokens": ["a", "b", "c", "d"],
    "embeddings": [[1, 0.5, -1, 2], [0.1, 0.2, 0.3, 0.4], [-2, 1, 0, 1], [3, -1, 2, 0.5]], "positions": "rope",
    "heads": [{"random": 3, "d_k": 4, "d_v": 2}, {"random": 4, "d_k": 2, "d_v": 3}], "causal": true})");
  // A model's rotation: split-half pairs at its own frequencies (one per pair of d_k).
  json model_rope = rope;
  model_rope["positions"] = {{"kind", "rope"}, {"pairs", "split-half"}, {"frequencies", {0.9, 0.05}}};
  model_rope["heads"] = {{{"random", 3}, {"d_k", 4}, {"d_v", 2}}};
  for (const json& request :
       {json{{"scenario", "three-tokens"}},
        json{{"scenario", "multi-head"}, {"options", {{"temperature", 0.37}, {"causal", true}, {"window", 3}}}},
        json{{"scenario", "previous-token"}, {"options", {{"sentence", "a cat sat on the warm mat"}}}},
        json{{"scenario", "random-head"},
             {"options", {{"add_random_heads", {{{"seed", 9}}}}}},
             {"detail", "weights"},
             {"detail_heads", {2}}},
        json{{"scenario", "cross-attention"}, {"options", {{"temperature", 2.5}}}}, json{{"scenario", rope}},
        json{{"scenario", model_rope}}}) {
    SCOPED_TRACE(request.dump().substr(0, 120));
    json with_input = request;
    with_input["attention_input"] = true;
    const json reply = attnlab::api_attention(with_input);
    ASSERT_TRUE(reply.contains("attention_input"));
    json document = reply["attention_input"];
    if (request.contains("detail_heads")) document["detail_heads"] = request["detail_heads"];
    attnlab::PackedArrays none;  // the matrices as lists of rows: the reader takes both forms
    const json recomputed = attnlab::unpack_reply(attnlab::attend_document(attnlab::pack_reply(document, none)));
    EXPECT_EQ(recomputed, without_server_fields(reply));
  }
}

TEST(InputDocument, ChangingTemperatureOrMaskInTheDocumentEqualsAskingTheApi) {
  json document = attnlab::api_attention({{"scenario", "multi-head"}, {"attention_input", true}})["attention_input"];
  document["temperature"] = 0.2;
  document["causal"] = true;
  attnlab::PackedArrays none;
  const json recomputed = attnlab::unpack_reply(attnlab::attend_document(attnlab::pack_reply(document, none)));
  const json asked =
      attnlab::api_attention({{"scenario", "multi-head"}, {"options", {{"temperature", 0.2}, {"causal", true}}}});
  EXPECT_EQ(recomputed, without_server_fields(asked));
}

TEST(InputDocument, BadDocumentsAreRefusedNamingTheField) {
  const json good =
      attnlab::api_attention({{"scenario", "three-tokens"}, {"attention_input", true}})["attention_input"];
  const auto error_with = [&](const std::string& pointer, const json& value) {
    json doc = good;
    const json::json_pointer at(pointer);
    if (value.is_discarded())
      doc[at.parent_pointer()].erase(at.back());  // discarded: remove the field
    else
      doc[at] = value;
    attnlab::PackedArrays none;
    try {
      (void)attnlab::attend_document(attnlab::pack_reply(doc, none));
    } catch (const attnlab::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_with("/temperature", 0), ::testing::HasSubstr("temperature: 0 is not a number > 0"));
  EXPECT_THAT(error_with("/temperature", json::value_t::discarded), ::testing::HasSubstr("temperature: missing"));
  EXPECT_THAT(error_with("/heads/0/w_k", json::parse("[[1, 2]]")),
              ::testing::HasSubstr("heads[0].w_k: is 1 × 2, expected 2 × 2"));
  EXPECT_THAT(error_with("/mask_tokens", {7}), ::testing::HasSubstr("mask_tokens: key 7 does not exist"));
  EXPECT_THAT(error_with("/queries_from/0/0", "x"), ::testing::HasSubstr("queries_from: row 0 holds \"x\""));
  EXPECT_THAT(error_with("/heads/0/ablation", "half"), ::testing::HasSubstr("heads[0].ablation"));
  EXPECT_THAT(error_with("/heads/0/w_v", json::value_t::discarded), ::testing::HasSubstr("heads[0].w_v: missing"));
  EXPECT_THAT(error_with("/detail_heads", {0, 3}), ::testing::HasSubstr("detail_heads: head 3 does not exist"));
  EXPECT_THAT(error_with("/tokens", json::array()), ::testing::HasSubstr("tokens: 0 queries"));
  EXPECT_THAT(error_with("/queries_from", json::parse("[[], [], []]")),
              ::testing::HasSubstr("queries_from: 0 columns"));
}
