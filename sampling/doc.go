// Package sampling turns a row of logits into the next token: the sampler
// chain of a sequence, its penalties, Mirostat, logit bias, the grammar
// hook and the log-probabilities the API reports.
//
// A Chain is built per sequence from Params (API.md 4.1 names and
// defaults) and applies, in this order, the reference order of llama.cpp:
//
//  1. logit bias (logit_bias, logit_bias_type)
//  2. penalties over the last penalty_last_n tokens (repeat_penalty,
//     frequency_penalty, presence_penalty)
//  3. min_tokens: end-of-generation tokens masked until reached (unless
//     nothing else may come next, say a finished grammar: then they are
//     unmasked rather than failing)
//  4. grammar: the optional Constraint masks tokens that may not come next
//     (if it also implements ConstraintChecker, llama.cpp's order instead:
//     steps 5 to 7 run unmasked first, and only a token the grammar
//     rejects makes the chain mask and run them again)
//  5. with temperature 0: greedy, the most likely remaining token
//  6. with mirostat_mode 0: top_k, tfs_z, typical_p, top_p, min_p (each
//     keeping at least min_keep tokens where llama.cpp does), then
//     temperature, then a draw from the softmax of what is left
//  7. with mirostat_mode 1 or 2: temperature, then Mirostat (v1 estimates
//     k from the 100 most likely tokens; v2 truncates by surprise), which
//     replaces the truncation samplers of step 6 and draws the token.
//
// Steps 1 to 4 edit the caller's logits in place; the rest work on the
// chain's own candidate buffers, so nothing is allocated per token. No
// step sorts the whole vocabulary unless its definition needs it (tail-free
// sampling, or a top_p/typical_p prefix that is most of the vocabulary):
// top_k keeps a heap, other prefixes use selection or key buckets.
//
// Draws follow llama.cpp exactly: each chain owns a std::mt19937-compatible
// generator seeded with the low 32 bits of seed, turns two outputs into a
// double as libstdc++'s generate_canonical does, and walks the candidates in
// the order llama.cpp has them at that point (descending logit after top_k,
// top_p, tail-free and Mirostat; typicality order after typical_p;
// vocabulary order when no sampler sorted them), with the same float32
// probabilities and float64 sums. Given the same logits and seed, a chain
// therefore picks the same tokens as llama.cpp's server with the same
// parameters (its extra samplers dry, xtc and top_n_sigma off, as by
// default), up to: exact logit ties (broken here by lower token id, where
// llama.cpp's order is unspecified); float32 rounding of its expf and of
// its running sums over a whole vocabulary, which can move a top_p or
// typical_p cut by one token in rare steps; Mirostat's first softmax, which
// sums in vocabulary order where llama.cpp sums after a full sort (saving
// that sort; in our reference tests one draw in about 10^4 differed before
// the reference adopted the same order); and, with a grammar, only when
// the Constraint implements ConstraintChecker.
//
// Tokens whose logit is -Inf or NaN after steps 1 to 4 never become
// candidates. llama.cpp keeps -Inf ones with probability 0, which changes
// nothing except in tail-free sampling (their zero probabilities enter its
// second differences) and typical sampling (where they make llama.cpp's
// entropy NaN).
//
// Log-probabilities (Chain.Logprob, Chain.TopLogprobs) are those of the raw
// model distribution: the softmax of the logits as passed to Sample, before
// bias, penalties, grammar, truncation and temperature. This is what
// llama.cpp's server reports by default (n_probs without
// post_sampling_probs) and what OpenAI documents as the model's
// log-probability of the token.
package sampling
