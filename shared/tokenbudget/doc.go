// Package tokenbudget bounds what authenticating callers of an operator's
// own HTTPS endpoints costs the API server: token buckets per key (a
// caller's address, a TrainingJob) that refuse before a token is reviewed,
// and TokenReviews within a budget of their own, remembered by the token's
// SHA-256, so a flood of garbage tokens costs at most that budget and a
// known caller is answered from the cache.
package tokenbudget
