// @ts-check
// The shapes the page works with, as JSDoc types for `tsc --noEmit -p web/` (this module
// exports no code). The API's replies are documented in docs/api.md; the page's own state
// (the one store, state.js) is `State` at the end.

/**
 * A grid of numbers where a masked cell (logit −∞) is null, as the JSON encoding writes it.
 * @typedef {(number | null)[][]} Grid
 */

/**
 * One head of a trace. A head of a lean trace (docs/api.md, "detail": "weights") carries
 * only its weights and output; the page gives it the shared mask pattern (`mask`).
 * @typedef {object} Head
 * @property {string} name
 * @property {number} d_k
 * @property {number} d_v
 * @property {number[][]} weights
 * @property {number[][]} output
 * @property {Grid} [logits]
 * @property {Grid} [mask]               the page's: the null pattern of a head with logits
 * @property {number[][]} [queries]
 * @property {number[][]} [keys]
 * @property {number[][]} [values]
 * @property {number[][]} [scores]
 * @property {number[][]} [scaled]
 * @property {number[][]} [exponentials]
 * @property {number[]} [row_sums]
 * @property {number[]} [shifts]
 * @property {boolean[]} [fully_masked]
 * @property {number | null} [random_seed]
 */

/**
 * A head with every intermediate (queries ... logits): what the maths panel needs.
 * @typedef {Head & {logits: Grid, queries: number[][], keys: number[][], values: number[][],
 *   scores: number[][], scaled: number[][], exponentials: number[][], row_sums: number[], shifts: number[],
 *   queries_unrotated?: number[][], keys_unrotated?: number[][]}} FullHead
 */

/**
 * POST api/attention's `intervention`: the baseline beside the run with the interventions.
 * @typedef {object} Intervention
 * @property {string[]} tokens           the baseline's tokens
 * @property {string[]} tokens_after     the tokens after (a replaced word, a new order)
 * @property {number[]} after_row        after_row[i]: the trace's row of baseline token i
 * @property {number[][]} before
 * @property {number[][]} after
 * @property {number[][]} delta
 * @property {number[]} delta_norm
 * @property {string[]} applied
 */

/**
 * A trace: POST api/attention's reply (or the page's engine's, the same shape).
 * @typedef {object} Trace
 * @property {string} scenario
 * @property {string[]} tokens
 * @property {string[]} source_tokens
 * @property {Head[]} heads
 * @property {number} temperature
 * @property {number} [score_scale] scores × this instead of ÷ √d_k (0 or absent: ÷ √d_k)
 * @property {{pairs: string, frequencies: number[]} | null} [rope] rotary positions: the pairs and each one's frequency
 * @property {boolean} causal
 * @property {string} positions
 * @property {number | null} [window]
 * @property {number[]} [mask_tokens]
 * @property {number[][]} output
 * @property {Intervention | null} [intervention]
 * @property {{precision?: number, temperature?: number, causal?: boolean} & Record<string, unknown>} [scenario_json]
 * @property {Record<string, unknown>} [attention_input]   the engine's problem (docs/api.md)
 * @property {boolean} [lean]            the page's: some heads lack their intermediates
 */

/**
 * A bundled scenario file (GET api/scenarios/NAME; docs/scenario-format.md), the fields the
 * page reads.
 * @typedef {object} ScenarioFile
 * @property {string} name
 * @property {string} [description]
 * @property {string[]} tokens
 * @property {{tokens: string[]} | null} [source]
 * @property {unknown[]} heads
 * @property {boolean} [causal]
 * @property {number} [temperature]
 * @property {number} [query]
 * @property {number} [precision]
 * @property {{labels?: string[]} | null} [readout]
 */

/** @typedef {{name: string, description?: string, default?: boolean}} ScenarioInfo */

/**
 * The options of POST api/attention and api/probe (docs/api.md).
 * @typedef {object} RequestOptions
 * @property {boolean} causal
 * @property {number} temperature
 * @property {string} [sentence]
 * @property {number[]} [mask_tokens]
 * @property {number[]} [remove_heads]
 * @property {{seed: number}[]} [add_random_heads]
 * @property {{index: number, word: string}[]} [replace_tokens]
 * @property {{head: number, kind: string}[]} [ablate_heads]
 * @property {{head: number, factor: number}[]} [scale_heads]
 * @property {number[]} [permute]
 */

/**
 * @typedef {object} RequestBody
 * @property {string | {model: ModelHead}} scenario   a bundled name, or a head of the server's model
 * @property {RequestOptions} options
 * @property {'weights'} [detail]
 * @property {number[]} [detail_heads]
 * @property {boolean} [attention_input]
 * @property {'packed'} [encoding]
 */

/** An exact count from the API: a number, or a BigInt above 2^53 (format.js, parseExact). @typedef {number | bigint} Count */

/**
 * POST api/probe's reply (docs/interventions.md), the fields the page shows.
 * @typedef {object} ProbeReply
 * @property {number} query
 * @property {string} query_token
 * @property {string} scenario
 * @property {{description: string}} readout
 * @property {number[]} output
 * @property {number} value
 * @property {string | null} [decision]
 * @property {string[]} heads
 * @property {string[]} source_tokens
 * @property {ProbeToken[]} tokens
 * @property {{value_weighted?: number | null, erasure?: number | null, grad_x_input?: number | null}} [kendall_tau]
 * @property {SerranoSmith} [serrano_smith]
 * @property {Counterfactual | null} [counterfactual]
 */
/**
 * @typedef {object} ProbeToken
 * @property {number} index
 * @property {string} token
 * @property {boolean} visible
 * @property {number[]} weights
 * @property {number} weight
 * @property {number} value_weighted
 * @property {number} erasure
 * @property {number} readout_without
 * @property {string} [decision_without]
 * @property {boolean} flips
 * @property {number} grad_x_input
 */
/**
 * @typedef {object} SerranoSmith
 * @property {number} [top_weight]
 * @property {number} [top_erasure]
 * @property {boolean} [top_flips]
 * @property {number[]} [others_flipping]
 * @property {boolean} [weights_agree]
 * @property {boolean} [has_decision]
 * @property {string} [verdict]
 */
/**
 * @typedef {object} Counterfactual
 * @property {number} head
 * @property {number} epsilon
 * @property {number[]} original
 * @property {number[]} found
 * @property {number} divergence
 * @property {number} readout_before
 * @property {number} readout_after
 * @property {string | null} [decision_before]
 * @property {string | null} [decision_after]
 * @property {boolean} [exact]
 * @property {string} [note]
 */

/**
 * POST api/cost's reply: one row per n.
 * @typedef {{shape: {d_model: Count, heads: Count, layers: Count, dtype: string, window: Count},
 *   rows: Array<Record<string, Count>>}} CostReply
 */
/**
 * The body the cost panel sends to POST api/cost.
 * @typedef {{tokens: number[], d_model: number, heads: number, layers: number, dtype: string, window: number}} CostBody
 */

/**
 * POST api/kv's reply (docs/api.md), the fields the page shows.
 * @typedef {object} KvReply
 * @property {{name: string, source?: string, layers: number, heads: number, kv_heads: number, head_dim: number,
 *   parameters: Count | null, note?: string}} model
 * @property {string} dtype
 * @property {Count} dtype_bytes
 * @property {Count} bytes_per_token
 * @property {Count | null} weight_bytes
 * @property {Count | null} crossover_context
 * @property {{budget_bytes: Count, weights_fit: boolean, left_for_cache: Count, max_context: Count} | null} [budget]
 * @property {KvRow[]} rows
 * @property {KvMeasured} [measured]
 */
/**
 * @typedef {{context: Count, cache_bytes: Count, cache_over_weights: number | null, total_bytes: Count,
 *   cache_exceeds_weights: boolean}} KvRow
 */
/**
 * @typedef {{layers: number, d_model: Count, points: Array<{context: Count, formula_bytes: Count, cache_bytes: Count,
 *   allocator_bytes: Count, rss_bytes: Count, decode_seconds: number}>}} KvMeasured
 */
/** GET api/models: the presets of `attnlab kv --model`. @typedef {{name: string, layers: number, kv_heads: number, head_dim: number, source: string}} ModelPreset */

/**
 * GET api/model (docs/api.md): the model `attnlab serve --model DIR` loaded, if any.
 * @typedef {object} ModelInfo
 * @property {boolean} loaded
 * @property {string} [name]
 * @property {number} [n_layer]
 * @property {number} [n_head]
 * @property {number} [n_kv_head]        H_kv: query heads h share KV head floor(h / (H / H_kv))
 * @property {string} [family]           gpt2, llama, mistral, qwen2, qwen3, gemma3
 * @property {string} [description]      the model's shape in one line, as `attnlab model info` prints it
 * @property {number} [n_embd]
 * @property {number} [n_positions]
 * @property {number} [vocab_size]
 * @property {boolean} [tokenizer]
 * @property {string | null} [run]        a training run under the server's --runs (null: its --model)
 * @property {number | null} [step]       the checkpoint step (null: the final model)
 * @property {boolean} [training]         the directory is a training run (it has train.json)
 * @property {number} [max_run_weights]  the most weights (layers × heads × n²) a run's reply holds; past it, sparse rows
 */
/** A next-token guess: the id, its text as the model sees it, its probability. @typedef {{id: number, token: string, probability: number}} TokenGuess */
/**
 * One head's detector scores on the run's text; null where the pattern has no key there.
 * @typedef {{layer: number, head: number, previous_token: number | null, duplicate_token: number | null, sink?: number | null,
 *   induction: number | null}} HeadScore
 */
/**
 * POST api/model/map's reply (docs/api.md): one head's weights pooled into cells of tile × tile
 * tokens (each a block's largest weight and where it is), or a window at one weight a cell;
 * null where the cell's queries see none of its keys.
 * @typedef {object} HeadMapReply
 * @property {string} head          "L.H"
 * @property {number} kv_head
 * @property {number} tile
 * @property {number} row0
 * @property {number} col0
 * @property {number} rows
 * @property {number} cols
 * @property {(number | null)[][]} weights
 * @property {(number | null)[][]} query
 * @property {(number | null)[][]} key
 * @property {number[]} ids
 * @property {string[]} tokens
 */
/**
 * A head of a long run opened in the model panel: its whole map, or the window a click opened.
 * @typedef {object} ModelMapState
 * @property {number} layer
 * @property {number} head
 * @property {{query: number, key: number} | null} zoom   the window's first query and key
 * @property {HeadMapReply | null} reply
 * @property {string} key        the request the reply answers (JSON)
 * @property {'running' | 'done' | 'error'} status
 * @property {string} message
 */
/**
 * POST api/model/run's reply (docs/api.md).
 * @typedef {object} ModelRun
 * @property {number[]} ids
 * @property {string[]} tokens             the model's token texts, leading spaces kept
 * @property {TokenGuess[]} top_k          after the last token
 * @property {TokenGuess[] | null} top_k_ablated
 * @property {string[]} ablated
 * @property {HeadScore[] | null} heads    layer by layer (null for sparse rows)
 * @property {number[][][][] | null} weights  [layer][head][n][n], 4 decimals
 * @property {SparseRows | null} [sparse]   a long text: each head's rows in brief instead of weights
 */
/**
 * `model run --sparse`'s rows in brief: per layer, head and query, the top keys and their
 * weights (-1 where fewer), the weight on the first token and the entropy in bits.
 * @typedef {{top: number, keys: number[][][][], weights: number[][][][], sink: number[][][], entropy: number[][][]}} SparseRows
 */
/**
 * What the model runs on: text (with a tokenizer) or token ids, and which model: a training
 * run under --runs (`run`, else the --model directory) at a checkpoint (`step`, else the
 * final model).
 * @typedef {{text?: string, ids?: number[], run?: string, step?: number}} ModelInput
 */
/** Which model the panel runs (docs/api.md, "run" and "step"). @typedef {{run: string | null, step: number | null}} ModelSource */
/** A head of the model on an input: the scenario {"model": ModelHead} of POST api/attention. @typedef {ModelInput & {layer: number, head: number}} ModelHead */
/** How the model panel orders its heads. @typedef {'head' | 'previous_token' | 'duplicate_token' | 'induction'} HeadSort */
/**
 * The model panel's part of the state.
 * @typedef {object} ModelState
 * @property {ModelInfo | null} info       null until GET api/model answers
 * @property {ModelSource} source          the model shown: the --model directory or a run, at a step
 * @property {string} input                the text box, as typed
 * @property {ModelInput | null} request   what the panel asks the model to run
 * @property {ModelRun | null} run         the last run answered
 * @property {string | null} runKey        the request `run` answers (JSON)
 * @property {string[]} ablate             heads picked for ablation, "L.H"
 * @property {{key: string, topK: TokenGuess[]} | null} ablated  the next token with them ablated, for `key`
 * @property {HeadSort} sort
 * @property {'idle' | 'running' | 'done' | 'error'} status
 * @property {string} message              the input's or the server's error
 * @property {ModelMapState | null} map      a head of a long run, opened
 */

/** One head's scores in a training log entry. @typedef {{layer: number, head: number, previous_token: number | null, duplicate_token: number | null, induction: number | null}} TrainHeadScores */
/**
 * One entry of a training run's log (train.json, docs/training.md).
 * @typedef {object} TrainLogEntry
 * @property {number} step
 * @property {number} seconds
 * @property {number | null} loss               the training batch's
 * @property {number | null} [loss_held_out]    fixed held-out sequences of the task (text: the last tenth)
 * @property {number | null} loss_first_half    held-out [BOS, r, r]: the first copy (chance)
 * @property {number | null} loss_second_half   ... and the repeat (the in-context loss)
 * @property {TrainHeadScores[]} heads
 */
/**
 * GET api/training: a training run (docs/api.md, "Training"). `log` holds the entries from
 * `since` on; the page keeps them all.
 * @typedef {object} TrainingView
 * @property {boolean} training             false: the --model directory is not a training run
 * @property {string | null} run            the run's name under --runs, or null for --model's
 * @property {string} [name]
 * @property {'running' | 'done' | 'cancelled' | 'failed' | 'stopped' | 'incomplete'} [state]
 * @property {boolean} [cancelling]
 * @property {Record<string, number | boolean | string>} [settings]
 * @property {TrainLogEntry[]} [log]
 * @property {number} [since]
 * @property {number} [log_count]
 * @property {number[]} [checkpoints]       the steps of checkpoints/step-N, ascending
 * @property {boolean} [final]              the final model is written
 * @property {string | null} [error]
 */
/**
 * GET api/training/job: the run started here last, the limits and defaults of a new one.
 * @typedef {object} TrainingJobInfo
 * @property {{run: string, dir: string, state: string, step: number | null, steps: number, log_count: number,
 *   cancelling: boolean, error: string | null} | null} job
 * @property {boolean} busy
 * @property {string} runs_dir
 * @property {Record<string, number | number[]>} limits
 * @property {Record<string, number | boolean | string>} defaults
 */
/**
 * The training panel's part of the state.
 * @typedef {object} TrainingState
 * @property {TrainingJobInfo | null} job   null until GET api/training/job answers
 * @property {TrainingView | null} view      the run whose curves are shown
 * @property {Record<string, string>} form   the new run's settings, as typed
 * @property {boolean} attnOnly
 * @property {'gpt2' | 'llama'} arch        the new run's architecture
 * @property {'idle' | 'starting' | 'cancelling' | 'error'} status
 * @property {string} message
 */

/**
 * A field of an operation, as GET api/operations describes it (docs/operations.md).
 * @typedef {object} OperationField
 * @property {string} name
 * @property {string} kind                 flag, count, counts, number, text, choice, bytes, tokens, token, heads, choices, sequences
 * @property {unknown} default
 * @property {string} help
 * @property {string} unit
 * @property {boolean} required
 * @property {string[]} faces               "cli", "api", "python"
 * @property {string} flag
 * @property {string} [ids]                 a token field's ids key
 * @property {number | null} [min]
 * @property {number | null} [max]
 * @property {string[]} [choices]
 */
/**
 * An operation's one description (GET api/operations).
 * @typedef {{name: string, help: string, fields: OperationField[]}} OperationDescription
 */
/**
 * A job of POST api/model/analysis (the verdict, patching), as GET api/model/analysis says.
 * @typedef {{state: string, kind: string | null, id: number, stage: string, done: number, total: number,
 *   result: any, error: string | null}} AnalysisJob
 */
/**
 * The attribution panel's part of the state.
 * @typedef {object} AttributionState
 * @property {any} quick                    POST api/model/attribute's reply
 * @property {AnalysisJob | null} job        the verdict's or patching's job, followed until it ends
 * @property {string} status
 * @property {boolean} error
 * @property {string | null} key            the model request the answers are for (JSON)
 */

/**
 * The "Why here?" panel's part of the state.
 * @typedef {object} WhyState
 * @property {any} reply                    POST api/model/qk's reply
 * @property {string} keyInput              the key box, as typed ('' for the key weighed most)
 * @property {string} status
 * @property {boolean} error
 * @property {string | null} key            the request the reply is for (JSON)
 */

/**
 * The circuits panel's part of the state.
 * @typedef {object} CircuitsState
 * @property {any} reply                    POST api/model/circuits's reply
 * @property {'q' | 'k' | 'v'} kind         the composition drawn as arrows
 * @property {string} status
 * @property {boolean} error
 * @property {string | null} key            the model source the reply is for (JSON)
 */

/**
 * The KV panel's loaded-model block: the contexts typed, POST api/model/kv's reply (with its report).
 * @typedef {object} KvReportState
 * @property {string} contexts               '' for the operation's default
 * @property {any} reply
 * @property {string} status
 * @property {boolean} error
 */

/**
 * The Generate panel's part of the state: the boxes as typed, the traced reply, the step shown.
 * @typedef {object} GenerationState
 * @property {string} prompt                 '' for the model panel's input
 * @property {string} tokens
 * @property {string} temperature
 * @property {string} topK
 * @property {string} seed
 * @property {any} reply                     POST api/model/generate's reply (traced), null before
 * @property {number} step                   the step shown, 1 to the tokens generated
 * @property {string} status
 * @property {boolean} error
 */

/**
 * The KV-cache eviction panel's part of the state.
 * @typedef {object} EvictState
 * @property {string} budgets                the budgets box, as typed
 * @property {string[]} policies             the policies ticked (full is always measured)
 * @property {string} cache                  the policies' cache type: f32, f16, bf16 or q8_0
 * @property {any} job                       the job it follows (GET api/model/analysis), null before
 * @property {string} status
 * @property {boolean} error
 */

/**
 * The survey panel's part of the state (docs/survey.md).
 * @typedef {object} SurveyState
 * @property {string} texts                  the box, a document a line, as typed
 * @property {any} job                       the job it follows (GET api/model/analysis), null before
 * @property {string} status
 * @property {boolean} error
 * @property {string | null} finder          the head finder's page for the last survey (a blob: URL)
 * @property {boolean} making                that page is being made
 * @property {{documents: string[]} | {sequences: number[][]} | null} asked   the documents the job surveys
 */

/**
 * The probe panel's part of the state.
 * @typedef {object} ProbeState
 * @property {string} readout            the readout picked ('' for the scenario's default)
 * @property {string} epsilon            the counterfactual's ε, as typed
 * @property {'idle' | 'done' | 'error' | 'refused' | 'waiting' | 'running'} status   waiting: for a click (a long model head)
 * @property {string} message            the refusal or the error
 * @property {ProbeReply | null} reply   the last probe the API answered
 * @property {string | null} key         what it answered (probe body and token count)
 * @property {string | null} force       a probe asked for by hand (its key), where it waits for a click
 */

/**
 * The cost panel's part: the shape as typed, the context length, the last answer.
 * @typedef {object} CostState
 * @property {number} n
 * @property {string} dModel
 * @property {string} heads
 * @property {string} layers
 * @property {string} dtype
 * @property {string} window
 * @property {CostReply | null} reply
 * @property {CostBody | null} body      what `reply` answered
 */

/**
 * The KV panel's part.
 * @typedef {object} KvState
 * @property {ModelPreset[]} models
 * @property {string} model
 * @property {string} dtype
 * @property {number} context
 * @property {number[]} tableContexts   the table's contexts: the kv operation's default (GET api/defaults)
 * @property {string} budget
 * @property {KvReply | null} reply
 * @property {{key: string, reply: KvReply} | null} measured   the last measurement, for (model, dtype) `key`
 * @property {boolean} measuring
 * @property {string} measureStatus
 * @property {number | null} measurePoints
 */

/**
 * Everything the page shows is a function of this (state.js holds the one instance).
 * Indices of interventions are the baseline's tokens and heads (docs/interventions.md).
 * @typedef {object} State
 * @property {ScenarioInfo[]} scenarios
 * @property {string | null} name          the bundled scenario (null while a model's head is shown)
 * @property {ModelHead | null} modelHead  the model's head shown instead (docs/api.md, {"model": ...})
 * @property {ScenarioFile | null} base    its file (for a model's head, one the page makes)
 * @property {boolean} causal
 * @property {number} temperature
 * @property {string | null} sentence      null: the scenario's own tokens
 * @property {number[]} maskTokens         key tokens hidden by the user
 * @property {number[]} removeHeads        indices of the scenario's own heads
 * @property {{seed: number}[]} addHeads
 * @property {{head: number, kind: string}[]} ablate
 * @property {{head: number, factor: number}[]} scale
 * @property {{index: number, word: string}[]} replace
 * @property {number[] | null} permute     the new order as baseline indices
 * @property {number | null} follow        a baseline token the query follows into the next trace
 * @property {Trace | null} trace          the trace shown
 * @property {Trace | null} apiTrace       the last trace answered for the page's own request
 * @property {Record<number, FullHead>} headDetail  intermediates fetched since for heads of a lean trace
 * @property {RequestBody | null} lastRequest  the request `trace` answers
 * @property {'page' | 'server' | null} computedBy  who computed the last trace
 * @property {number} query
 * @property {number} head
 * @property {'heatmap' | 'arcs' | 'table'} view
 * @property {boolean} mathsFull            the maths panel writes every number of a vector, not the first and last few
 * @property {boolean | null} mathsByWeight  its rows by weight (true) or position (false); null: by weight past 32 keys
 * @property {'absolute' | 'head'} scaleMode  colours from 0 to 1, or to each head's largest weight
 * @property {number} viewWidth            the views' width in CSS px (a ResizeObserver keeps it)
 * @property {{row: number, col: number, tile?: number} | null} hover  the heatmap cell under the pointer (of a pooled heatmap: the block's largest weight, tile its side)
 * @property {{row0: number, col0: number} | null} heatmapZoom  a pooled heatmap's window opened by a click (its first query and key), null for the whole map
 * @property {string | null} error
 * @property {string} serverStatus
 * @property {string} sentenceInput        the sentence box, as typed
 * @property {string} seedInput            the seed box, as typed
 * @property {number} guideStep            the guided path's active step (0: none)
 * @property {ProbeState} probe
 * @property {CostState} cost
 * @property {KvState} kv
 * @property {ModelState} model
 * @property {TrainingState} training
 * @property {AttributionState} attribution
 * @property {WhyState} why
 * @property {CircuitsState} circuits
 * @property {KvReportState} kvReport
 * @property {GenerationState} generation
 * @property {EvictState} evict
 * @property {SurveyState} survey
 * @property {Record<string, OperationDescription>} operations  every operation's description, from the server
 * @property {Record<string, Record<string, string>>} options   "More options" as typed, by operation and field
 * @property {string | null} costError     the cost and KV panels' error line
 */

export {};
